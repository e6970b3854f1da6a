"""Never lose a user's file (issue 22): the recipes that once made `trtls build` overwrite the recipe, another engine's
model, the file behind a symlink, or write outside the folder — each refused by the real CLI with exit 2 and a
located error, and nothing on disk changed (every file's bytes and every link's target compared before and after).

On the code before issue 22 `trtls check` said ok for each and `trtls build` ran: `trtls.toml` became a 13 MB engine,
`large.onnx` was replaced, `precious.bin` outside the folder held the engine, and a matrix variant name wrote evidence
to `/tmp/x/PWNED-…`. The rule each test enforces is listed in docs/reliability.md ("What trtls will never write").
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import QUICKSTART

DEMO_OUTPUT = 'output = "build/demo.engine"'


def trtls(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "trtls", *args], capture_output=True, text=True, timeout=180)


def snapshot(root: Path) -> dict[str, str]:
    """Every entry under `root`: a file's sha256, a symlink's target, a folder's mark."""
    out: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            rel = str(p.relative_to(root))
            if p.is_symlink():
                out[rel] = "-> " + os.readlink(p)
            elif p.is_dir():
                out[rel] = "dir"
            else:
                out[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


@pytest.fixture
def site(tmp_path: Path, quickstart_models: Path) -> Path:
    """tmp/recipe (a copy of the quickstart with its models) beside tmp/elsewhere/precious.bin."""
    recipe = tmp_path / "recipe"
    (recipe / "models").mkdir(parents=True)
    (recipe / "trtls.toml").write_text((QUICKSTART / "trtls.toml").read_text())
    for model in ("demo.onnx", "large.onnx"):
        (recipe / "models" / model).write_bytes((quickstart_models / model).read_bytes())
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "precious.bin").write_bytes(b"the user's precious file\n")
    return recipe


def set_demo_output(recipe: Path, value: str) -> None:
    text = (recipe / "trtls.toml").read_text()
    assert DEMO_OUTPUT in text
    (recipe / "trtls.toml").write_text(text.replace(DEMO_OUTPUT, f'output = "{value}"', 1))


def refused(recipe: Path, code: str, *build_args: str) -> None:
    """`trtls check` and `trtls build` both exit 2 naming `code` at the output key, and change nothing on disk."""
    root = recipe.parent
    before = snapshot(root)
    check = trtls("check", str(recipe))
    assert check.returncode == 2, check.stdout + check.stderr
    assert code in check.stdout and "Traceback" not in check.stdout + check.stderr
    build = trtls("build", str(recipe), *(build_args or ("--engine", "demo")))
    assert build.returncode == 2, build.stdout + build.stderr
    assert "Traceback" not in build.stderr
    located = [line for line in build.stderr.splitlines() if f" {code} error:" in line]
    assert located and located[0].startswith(f"{recipe / 'trtls.toml'}:"), build.stderr  # file:line:col
    assert snapshot(root) == before, "nothing may change on disk"


def test_output_may_not_be_the_recipe(site: Path) -> None:
    set_demo_output(site, "trtls.toml")
    refused(site, "TRT109")


def test_output_may_not_be_another_engines_model(site: Path) -> None:
    set_demo_output(site, "models/large.onnx")
    refused(site, "TRT109")


def test_a_symlinked_output_is_never_written_through(site: Path) -> None:
    (site / "build").mkdir()
    (site / "build" / "demo.engine").symlink_to(site.parent / "elsewhere" / "precious.bin")
    refused(site, "TRT118")


def test_a_symlinked_output_folder_that_leaves_the_recipe_folder_is_refused(site: Path) -> None:
    (site / "build").symlink_to(site.parent / "elsewhere")
    refused(site, "TRT118")


def test_an_output_outside_the_folder_needs_allow_outside(site: Path) -> None:
    set_demo_output(site, "../../PWNED-outside.engine")
    refused(site, "TRT117")
    assert not (site.parent.parent / "PWNED-outside.engine").exists()


def test_a_matrix_variant_name_cannot_write_outside_the_folder(site: Path) -> None:
    with (site / "trtls.toml").open("a") as fh:
        fh.write(
            '\n[engines.demo.matrix]\noutput = "build/{engine}-{precision}.engine"\n'
            'precision = { "../../../../x/PWNED" = "models/demo.onnx" }\n'
        )
    refused(site, "TRT119", "--engine", "demo", "--matrix")
    assert not (site.parent / "x").exists() and not (site.parent.parent / "x" / "PWNED.engine").exists()


def test_allow_outside_lets_one_path_out_and_the_check_says_ok(site: Path) -> None:
    set_demo_output(site, "../shared/demo.engine")
    text = (site / "trtls.toml").read_text()
    (site / "trtls.toml").write_text('allow_outside = ["../shared"]\n' + text.split("\n", 1)[1])
    check = trtls("check", str(site))
    assert check.returncode == 0, check.stdout
    build = trtls("build", str(site), "--engine", "demo")  # a real build: the opt-in is recorded in its evidence
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-2000:]
    engine = site.parent / "shared" / "demo.engine"
    assert engine.stat().st_size > 0
    (summary,) = (site / ".trtls" / "runs").glob("demo-*/summary.json")
    record = json.loads(summary.read_text())
    assert record["writesOutside"] == [{"what": "output", "path": str(engine), "allowedBy": "allow_outside"}]
    assert record["engineArtifact"]["sha256"] == hashlib.sha256(engine.read_bytes()).hexdigest()


@pytest.mark.parametrize(
    ("extra", "code"),
    [
        ("x = " + "{a = " * 400 + "1" + "}" * 400, "TRT120"),  # a 3 KB inline table 400 deep
        ("x = " + "[" * 300 + "]" * 300, "TRT120"),
        ("[engines.demo.builder.deep]\n" + "k." * 500 + "v = 1", "TRT120"),  # dotted keys nest without brackets
        ('x = "a\\u0000b"', "TRT102"),
    ],
    ids=["inline-tables", "arrays", "dotted-keys", "nul"],
)
def test_deep_nesting_is_a_located_error_never_a_traceback(site: Path, extra: str, code: str) -> None:
    recipe = site / "trtls.toml"
    text = recipe.read_text()
    recipe.write_text(extra + "\n" + text if not extra.startswith("[") else text + "\n" + extra + "\n")
    before = snapshot(site.parent)
    for args in (("check", str(site)), ("build", str(site), "--engine", "demo")):
        r = trtls(*args)
        assert r.returncode == 2, r.stderr[-2000:]
        assert "Traceback" not in r.stderr and "RecursionError" not in r.stderr + r.stdout, r.stderr[-2000:]
        out = r.stdout if args[0] == "check" else r.stderr
        assert f" {code} error:" in out and out.startswith(f"{recipe}:"), out[-2000:]
    assert snapshot(site.parent) == before


@pytest.mark.parametrize(("bundle", "code"), [("trtls.toml", "TRT109"), ("../../PWNED.bundle", "TRT117")])
def test_route_build_refuses_a_bundle_over_the_recipe_or_outside(site: Path, bundle: str, code: str) -> None:
    (site / "ckpt").mkdir()
    with (site / "trtls.toml").open("a") as fh:
        fh.write(
            '\n[routes.r]\nengine = "demo"\nintended_use = "test"\nallowed_licenses = ["mit"]\n'
            'checkpoint = { path = "ckpt", revision = "d065c296e0fef52b015f4755c02dda4b3064c1d2" }\n'
            f'bundle = "{bundle}"\n'
        )
    before = snapshot(site.parent)
    r = trtls("route", "build", "--route", "r", str(site))
    assert r.returncode == 2, r.stdout + r.stderr
    assert f" {code} error:" in r.stderr and r.stderr.startswith(f"{site / 'trtls.toml'}:"), r.stderr
    assert "Traceback" not in r.stderr
    assert snapshot(site.parent) == before and not (site.parent.parent / "PWNED.bundle").exists()
