"""A route table's value of the wrong TOML type is a located error, never converted.

The route tables kept their own pydantic configuration, strict on `overwrite` and `allow_pickle` only: `warmup = "50"`
timed 50 runs, `iterations = 1000.0` 1000, `atol = "1e-4"` judged parity with 0.0001, `keep_io_types = 1` kept the
model's types, `stages = ["1", 10, 100]` started the canary at 1 % — `trtls check` said nothing of it. Every route
table ([routes.NAME] and what it holds: tolerances, thresholds, precision, canary_plan, …) now shares the engine
recipe's strict configuration (`core.validation.RECIPE_TABLE`): TRT102 on the value, file:line:col, exit 2 from
`trtls check`, and `trtls route build` refuses with the same located message before it exports or writes anything.
Real route recipes (samples/route's), real `trtls` processes."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SAMPLE = Path(__file__).resolve().parents[2] / "samples" / "route" / "trtls.toml"
ROUTE = "[routes.tiny_ort]"


def _trtls(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "trtls", *args], capture_output=True, text=True, timeout=300, cwd=cwd)


def _route_recipe(folder: Path, old: str, new: str, value: str) -> tuple[Path, int, int]:
    """The route sample's recipe with `old` in [routes.tiny_ort] replaced by `new`: (recipe, line, column of
    `value` on the line that holds the last line of `new`)."""
    folder.mkdir()
    recipe = folder / "trtls.toml"
    shutil.copyfile(SAMPLE, recipe)
    text = recipe.read_text()
    start = text.index(ROUTE)
    assert old in text[start:], old
    recipe.write_text(text[:start] + text[start:].replace(old, new, 1))
    lines = recipe.read_text().splitlines()
    marker = new.splitlines()[-1]
    line = next(i for i in range(lines.index(ROUTE), len(lines)) if marker in lines[i])
    return recipe, line + 1, lines[line].index(value, lines[line].index(marker)) + 1


CASES = [
    pytest.param(
        "warmup = 50",
        'warmup = "50"',
        '"50"',
        "'warmup' must be an integer, not the string '50' (write 50 without quotes)",
        id="thresholds-warmup-quoted",
    ),
    pytest.param(
        "iterations = 1000",
        "iterations = 1000.0",
        "1000.0",
        "'iterations' must be an integer, not the number 1000.0",
        id="thresholds-iterations-float",
    ),
    pytest.param(
        "latency_p50_ms = 5.0",
        'latency_p50_ms = "5"',
        '"5"',
        "'latency_p50_ms' must be a number, not the string '5' (write 5 without quotes)",
        id="thresholds-latency-quoted",
    ),
    pytest.param(
        "atol = 1e-4",
        'atol = "1e-4"',
        '"1e-4"',
        "'atol' must be a number, not the string '1e-4' (write 1e-4 without quotes)",
        id="tolerances-atol-quoted",
    ),
    pytest.param(
        'runtime = "onnxruntime"',
        'runtime = "onnxruntime"\nprecision = { convert = "fp16", keep_io_types = 1 }',
        "1 }",
        "'keep_io_types' must be true or false, not the number 1",
        id="precision-bool-as-1",
    ),
    pytest.param(
        "stages = [1, 10, 100]",
        'stages = ["1", 10, 100]',
        '"1"',
        "'stages[0]' must be a number, not the string '1' (write 1 without quotes)",
        id="canary-stage-quoted",
    ),
    pytest.param(
        'runtime = "onnxruntime"',
        'runtime = "onnxruntime"\nrevalidate_after_days = "30"',
        '"30"',
        "'revalidate_after_days' must be an integer, not the string '30' (write 30 without quotes)",
        id="route-days-quoted",
    ),
    pytest.param(  # either/or: rule tables or words (core.validation.either_error)
        'abort_if = "error rate > 0.1 % or p95 > 20 ms"',
        "abort_if = 5",
        "5,",
        "'abort_if' must be an array of rule tables or the rules in words (a string), not the number 5",
        id="canary-abort_if-number",
    ),
    pytest.param(  # either/or: one file or a table of named sets
        'reference_inputs = "inputs/reference.npz"',
        "reference_inputs = true",
        "true",
        "'reference_inputs' must be a .npz path or a table of named input sets "
        '{ short = "a.npz", long = "b.npz" }, not true',
        id="reference_inputs-boolean",
    ),
    pytest.param(  # an item of the table form is named by its set, not taken for a member's tag
        'reference_inputs = "inputs/reference.npz"',
        'reference_inputs = { short = 1, long = "inputs/long.npz" }',
        "1,",
        "'short' must be a string, not the number 1",
        id="reference_inputs-set-number",
    ),
]


@pytest.mark.parametrize(("old", "new", "value", "said"), CASES)
def test_a_route_value_of_the_wrong_type_is_a_located_error(
    tmp_path: Path, old: str, new: str, value: str, said: str
) -> None:
    recipe, line, col = _route_recipe(tmp_path / "route", old, new, value)
    check = _trtls("check", str(recipe.parent), cwd=tmp_path)
    assert check.returncode == 2, check.stdout + check.stderr
    mine = [s for s in check.stdout.splitlines() if "TRT102" in s]  # the copy lacks the checkpoint: TRT104s beside
    assert mine == [f"{recipe}:{line}:{col}: TRT102 error: {said}"], check.stdout


def test_route_build_refuses_a_wrong_type_located_and_writes_nothing(tmp_path: Path) -> None:
    recipe, line, col = _route_recipe(tmp_path / "route", "warmup = 50", 'warmup = "50"', '"50"')
    before = {p.relative_to(recipe.parent).as_posix() for p in recipe.parent.rglob("*") if p.is_file()}
    build = _trtls("route", "build", "--route", "tiny_ort", cwd=recipe.parent)
    assert build.returncode == 2, build.stdout + build.stderr
    said = f"{recipe}:{line}:{col}: TRT102 'warmup' must be an integer, not the string '50' (write 50 without quotes)"
    assert said in build.stderr, build.stderr
    written = {p.relative_to(recipe.parent).as_posix() for p in recipe.parent.rglob("*") if p.is_file()} - before
    # no export, no bundle, no build folder: only the refused run's record (every route build run is recorded)
    assert written == {".trtls/routes/tiny_ort/route-build.json"}, written
    assert not (recipe.parent / "build").exists()


def test_the_route_sample_as_written_has_no_type_error(tmp_path: Path) -> None:
    """Nothing in samples/route relied on a conversion: its thresholds' integers are numbers (`memory_mib = 1024`)."""
    folder = tmp_path / "route"
    folder.mkdir()
    shutil.copyfile(SAMPLE, folder / "trtls.toml")
    check = _trtls("check", str(folder), cwd=tmp_path)
    assert not [s for s in check.stdout.splitlines() if "TRT102" in s or "TRT106" in s], check.stdout
