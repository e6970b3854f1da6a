"""TOML's `inf`, `-inf` and `nan` in any number of any recipe table are located errors, and nothing is built.

TOML reads `inf`, `-inf` and `nan` as floats (and `1e999` as inf), and pydantic takes them for a float unless told
otherwise: only the route's tolerances, thresholds and canary plan were told, field by field. `cancel_grace_s = nan`,
`[cluster] queue_timeout_s = inf`, `[evidence] max_age_days = inf`, `run_on.num_cpus = -inf` checked clean and
reached the build — a nan passes every bound (`gt=0` compares false), an infinite timeout never ends. Now the one
configuration every recipe table shares (`core.validation.RECIPE_TABLE`) refuses them: a TRT102 on the value, in
TOML's words (`'queue_timeout_s' must be a finite number, not inf`), exit 2 from `trtls check`, and `trtls build` /
`trtls route build` build nothing. Real recipes, real `trtls` processes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any, get_args

import pytest
from pydantic import BaseModel

from trtls.core.recipe import RecipeFile
from trtls.core.route import RouteModel
from trtls.core.validation import FreeTable

VALUES = ["inf", "-inf", "nan"]
FINITE = "a finite number"

# Every table kind of an engine's recipe, each number written `{v}` (one per line): the key the message names and
# what it says the key must be. An integer field already refused a float; it says so in the same words.
ENGINE_TABLES = """
[engines.demo.builder.memory_pool_limits]
workspace_mib = {v}

[engines.demo.run_on]
num_gpus = {v}
num_cpus = {v}

[engines.large.matrix]
output = "build/large-{cell}.engine"
optimization_level = [{v}]

[cluster]
queue_timeout_s = {v}
keep_warm_s = {v}

[store]
max_size = {v}

[evidence]
max_age_days = {v}
max_size_mb = {v}
"""
ENGINE_SAID = {
    "cancel_grace_s": FINITE,
    "max[2]": "an integer",
    "workspace_mib": "an integer",
    "num_gpus": FINITE,
    "num_cpus": FINITE,
    "optimization_level[0]": "an integer",
    "queue_timeout_s": FINITE,
    "keep_warm_s": FINITE,
    "max_size": "an integer or a string",
    "max_age_days": FINITE,
    "max_size_mb": FINITE,
}

ROUTE_RECIPE = """version = 1

[routes.numbers]
onnx = "build/numbers.onnx"
checkpoint = { path = "checkpoint", revision = "d065c296e0fef52b015f4755c02dda4b3064c1d2" }
intended_use = "numbers that judge nothing"
allowed_licenses = ["mit"]
bundle = "build/numbers.bundle"
runtime = "onnxruntime"

[routes.numbers.tolerances.logits]
atol = {v}
quantile = {v}

[routes.numbers.thresholds]
latency_p95_ms = {v}
max_regression = {v}
warmup = {v}

[routes.numbers.canary_plan]
stages = [1, {v}]
owner = "ml-serving"

[[routes.numbers.canary_plan.abort_if]]
metric = "error_rate"
comparison = ">"
threshold = {v}
unit = "%"
"""
ROUTE_SAID = {
    "atol": FINITE,
    "quantile": FINITE,
    "latency_p95_ms": FINITE,
    "max_regression": FINITE,
    "warmup": "an integer",
    "stages[1]": FINITE,
    "threshold": FINITE,
}


def _trtls(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "trtls", *args], capture_output=True, text=True, timeout=300, cwd=cwd)


def _write(recipe: Path, template: str, value: str, said: dict[str, str]) -> list[str]:
    """`template` with every `{v}` written `value` into `recipe`: the TRT102 line `trtls check` must print for each,
    placed on the value (line and column of its `{v}`, one a line)."""
    expected = []
    for number, line in enumerate(template.splitlines(), 1):
        if "{v}" in line:
            key = next(k for k in said if line.startswith(k.split("[")[0] + " = "))
            where = f"{recipe}:{number}:{line.index('{v}') + 1}"
            expected.append(f"{where}: TRT102 error: '{key}' must be {said[key]}, not {value}")
    recipe.write_text(template.replace("{v}", value))
    assert len(expected) == len(said), expected
    return sorted(expected)


def _trt102s(check: subprocess.CompletedProcess[str]) -> list[str]:
    return sorted(s for s in check.stdout.splitlines() if "TRT102" in s)


@pytest.mark.parametrize("value", VALUES)
def test_every_engine_table_refuses_a_number_that_is_not_finite_and_builds_nothing(workspace: Path, value: str) -> None:
    recipe = workspace / "trtls.toml"
    text = recipe.read_text()
    edits = (("cancel_grace_s = 10", "cancel_grace_s = {v}"), ("max = [8, 3, 32, 32]", "max = [8, 3, {v}, 32]"))
    for old, new in edits:
        assert old in text
        text = text.replace(old, new, 1)
    expected = _write(recipe, text + ENGINE_TABLES, value, ENGINE_SAID)

    check = _trtls("check", str(workspace))
    assert check.returncode == 2, check.stdout + check.stderr
    assert _trt102s(check) == expected, check.stdout
    assert check.stdout.splitlines()[-1] == f"{recipe}: {len(expected)} problems", check.stdout

    build = _trtls("build", str(workspace), "--engine", "demo")
    assert build.returncode == 2, build.stdout + build.stderr
    assert f"'cancel_grace_s' must be a finite number, not {value}" in build.stderr, build.stderr
    assert not (workspace / "build").exists() and not (workspace / ".trtls" / "runs").exists()


@pytest.mark.parametrize("value", VALUES)
def test_every_route_table_refuses_a_number_that_is_not_finite_and_builds_nothing(tmp_path: Path, value: str) -> None:
    recipe = tmp_path / "trtls.toml"
    expected = _write(recipe, ROUTE_RECIPE, value, ROUTE_SAID)

    check = _trtls("check", str(tmp_path))
    assert check.returncode == 2, check.stdout + check.stderr
    assert _trt102s(check) == expected, check.stdout  # the files it names are missing too: TRT104s beside

    build = _trtls("route", "build", "--route", "numbers", cwd=tmp_path)
    assert build.returncode == 2, build.stdout + build.stderr
    assert f"'atol' must be a finite number, not {value}" in build.stderr, build.stderr
    written = {p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file()}
    assert written == {"trtls.toml", ".trtls/routes/numbers/route-build.json"}, written  # only the refused run's record


def _tables(model: type[BaseModel], seen: set[type[BaseModel]]) -> set[type[BaseModel]]:
    """Every model a recipe's table is read into, from `model` down."""
    if model not in seen:
        seen.add(model)
        for field in model.model_fields.values():
            todo: list[Any] = [field.annotation]
            while todo:
                ann = todo.pop()
                if isinstance(ann, type) and issubclass(ann, BaseModel):
                    _tables(ann, seen)
                todo.extend(get_args(ann))
    return seen


def test_every_recipe_table_shares_the_one_configuration() -> None:
    """A table added later refuses inf and nan (and converts nothing) without being told: it is read into a model
    whose configuration is `RECIPE_TABLE`'s, never one of its own."""
    tables = _tables(RecipeFile, set()) | _tables(RouteModel, set())
    assert len(tables) > 20, tables
    lax = sorted(t.__name__ for t in tables if t.model_config.get("allow_inf_nan", True))
    config = {t.__name__: t.model_config for t in tables}
    loose = sorted(n for n, c in config.items() if (c.get("strict"), c.get("extra")) != (True, "forbid"))
    assert lax == [] and loose == [], (lax, loose)


FREE_CLUSTER = """
[cluster]
runtime_env = { env_vars = { A = "1" }, weights = [1.0, {v}] }
"""
# the route's own keys (the tables after them left out), then a free-form table
FREE_ROUTE = ROUTE_RECIPE.split("\n[routes.numbers.", 1)[0] + "runtime_options = { threads = 1, timeout_s = {v} }\n"


def _said_at(recipe: Path, text: str, starts: str, at: str, key: str, value: str) -> str:
    """`recipe` written `text`: the TRT102 line for `key`, placed on the value `at` of the line that starts `starts`."""
    recipe.write_text(text)
    lines = text.splitlines()
    number = next(n for n, line in enumerate(lines, 1) if line.startswith(starts))
    column = lines[number - 1].rindex(at) + 1
    return f"{recipe}:{number}:{column}: TRT102 error: '{key}' must be a finite number, not {value}"


@pytest.mark.parametrize("value", VALUES)
def test_a_free_form_table_refuses_a_number_that_is_not_finite_on_its_key(
    workspace: Path, tmp_path: Path, value: str
) -> None:
    """A route's `runtime_options` and `[cluster] runtime_env` take keys the recipe does not fix (`dict[str, Any]`),
    so no field refused `timeout_s = inf` there: gate 4's runtime was given a timeout that never ends. Now a number
    that is not finite anywhere in such a table, however deep, is the same TRT102 on the key that holds it."""
    recipe = workspace / "trtls.toml"
    cluster = recipe.read_text() + FREE_CLUSTER.replace("{v}", value)
    said = _said_at(recipe, cluster, "runtime_env = ", value + "]", "weights[1]", value)
    check = _trtls("check", str(workspace))
    assert check.returncode == 2 and _trt102s(check) == [said], check.stdout + check.stderr

    route = tmp_path / "route" / "trtls.toml"
    route.parent.mkdir()
    said = _said_at(route, FREE_ROUTE.replace("{v}", value), "runtime_options = ", value, "timeout_s", value)
    check = _trtls("check", str(route.parent))
    assert check.returncode == 2 and _trt102s(check) == [said], check.stdout + check.stderr


def test_every_free_form_table_of_a_recipe_refuses_what_is_not_finite() -> None:
    """A free-form table added later is a FreeTable (core.validation), never a bare `dict[str, Any]` no rule reads."""
    tables = _tables(RecipeFile, set()) | _tables(RouteModel, set())
    free_form = {
        f"{t.__name__}.{name}": [getattr(m, "func", None) for m in field.metadata]
        for t in tables
        for name, field in t.model_fields.items()
        if field.annotation == dict[str, Any]
    }
    assert sorted(free_form) == ["ClusterTable.runtime_env", "RouteModel.runtime_options"], free_form
    (rule,) = [m.func for m in get_args(FreeTable)[1:]]  # the one rule a FreeTable carries (its AfterValidator)
    assert all(rules == [rule] for rules in free_form.values()), free_form
