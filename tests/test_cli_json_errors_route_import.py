"""`trtls route …` and `trtls import trtexec` with `--json`: every failure is one JSON error record on stdout.

They printed text only (and `--json` was an unknown option: a usage error), where `trtls build --json` prints each
error as a record a script reads (`cli/usage.emit_error`: `{"type": "error", "code", "message", "severity", "file",
"line", "col"}`, placed by `cli/common.report_finding` / `report_error`). Now each failure — a recipe that cannot be
read, a recipe with errors, a bad argument — is that record, alone on stdout, the text for people on stderr, the exit
code the one the command has without `--json`. Real `trtls` processes on real recipes (samples/route, quickstart)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
ROUTE_SAMPLE = REPO / "samples" / "route"


def _trtls(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "trtls", *args], capture_output=True, text=True, timeout=300, cwd=cwd)


def _one_record(args: tuple[str, ...], cwd: Path) -> tuple[dict[str, Any], str]:
    """The command run with --json: its one JSON error record (nothing else on stdout) and its stderr; its exit code
    the one it has without --json."""
    plain = _trtls(*args, cwd=cwd)
    words = list(args)
    at = words.index("--") if "--" in words else len(words)
    done = _trtls(*words[:at], "--json", *words[at:], cwd=cwd)
    assert done.returncode == plain.returncode != 0, (done.returncode, plain.returncode, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 1, done.stdout
    record = json.loads(lines[0])
    assert record["type"] == "error" and record["severity"] == "error", record
    assert record["message"] and record["message"] in done.stderr, (record, done.stderr)
    return record, done.stderr


def _route_copy(tmp_path: Path, old: str = "", new: str = "") -> Path:
    folder = tmp_path / "route"
    shutil.copytree(ROUTE_SAMPLE, folder, ignore=shutil.ignore_patterns(".trtls", "build"))
    if old:
        text = (folder / "trtls.toml").read_text()
        assert old in text
        (folder / "trtls.toml").write_text(text.replace(old, new, 1))
    return folder


def _line_col(recipe: Path, needle: str) -> tuple[int, int]:
    lines = recipe.read_text().splitlines()
    i = next(i for i, line in enumerate(lines) if needle in line)
    return i + 1, lines[i].index(needle) + 1


@pytest.mark.parametrize("command", [("route", "build"), ("route", "lock"), ("route", "status")])
def test_a_route_recipe_that_cannot_be_read(tmp_path: Path, command: tuple[str, ...]) -> None:
    missing = tmp_path / "nowhere" / "trtls.toml"
    record, _ = _one_record((*command, str(missing)), tmp_path)
    assert record["code"] == "TRT104" and record["file"] == str(missing), record


def test_route_build_of_a_route_with_an_error_in_its_table(tmp_path: Path) -> None:
    folder = _route_copy(tmp_path, "warmup = 50", 'warmup = "50"')
    record, _ = _one_record(("route", "build", "--route", "tiny_ort", "."), folder)
    line, col = _line_col(folder / "trtls.toml", '"50"')
    assert record["code"] == "TRT102" and record["file"] == str(folder / "trtls.toml"), record
    assert (record["line"], record["col"]) == (line, col), record
    assert "'warmup' must be an integer" in record["message"], record


@pytest.mark.parametrize("command", [("route", "build"), ("route", "lock"), ("route", "status")])
def test_a_route_that_is_not_in_the_recipe(tmp_path: Path, quickstart_models: Path, command: tuple[str, ...]) -> None:
    # the quickstart: a recipe with no route and no error (a lifecycle command loads it whole first)
    folder = tmp_path / "quickstart"
    shutil.copytree(quickstart_models.parent, folder, ignore=shutil.ignore_patterns(".trtls", "build"))
    record, _ = _one_record((*command, ".", "--route", "nope"), folder)
    assert record["code"] == "TRT107" and record["file"] == str(folder / "trtls.toml"), record
    assert "no route named nope" in record["message"], record


def test_route_lock_of_a_recipe_with_errors(tmp_path: Path) -> None:
    folder = tmp_path / "bad"
    folder.mkdir()
    (folder / "trtls.toml").write_text('[engines.demo]\nonnx = "m.onnx"\noutput = "d.engine"\nwarmup_runs = 3\n')
    record, _ = _one_record(("route", "lock", "."), folder)
    assert record["code"] == "TRT101" and (record["line"], record["col"]) == (4, 1), record


def test_a_route_lifecycle_command_given_too_many_words(tmp_path: Path) -> None:
    folder = _route_copy(tmp_path)
    record, _ = _one_record(("route", "status", ".", "extra"), folder)
    assert record["code"] == "TRT420" and "too many words" in record["message"], record


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (("--saveEngine=m.engine",), "no --onnx=MODEL"),
        (("--onnx=m.onnx", "--profile=x"), "--profile: expected"),
    ],
    ids=["no-onnx", "bad-value"],
)
def test_import_with_arguments_it_cannot_take(tmp_path: Path, argv: tuple[str, ...], said: str) -> None:
    record, _ = _one_record(("import", "trtexec", "--", *argv), tmp_path)
    assert record["code"] == "TRT420" and said in record["message"], record


def test_import_write_to_a_recipe_that_cannot_be_read(tmp_path: Path) -> None:
    recipe = tmp_path / "trtls.toml"
    recipe.write_bytes(b"# \xff\xfe not UTF-8\n")
    record, _ = _one_record(("import", "trtexec", "--write", str(recipe), "--", "--onnx=m.onnx"), tmp_path)
    assert record["code"] == "TRT104" and record["file"] == str(recipe), record
    assert "cannot read the recipe" in record["message"], record


def test_import_write_to_a_file_that_is_not_a_recipe(tmp_path: Path) -> None:
    target = tmp_path / "pyproject.toml"
    target.write_text('# a project\n[project]\nname = "x"\n')
    record, _ = _one_record(("import", "trtexec", "--write", str(target), "--", "--onnx=m.onnx"), tmp_path)
    assert record["code"] == "TRT101" and record["file"] == str(target), record
    assert (record["line"], record["col"]) == (2, 1), record  # the `[project]` table
    assert target.read_text() == '# a project\n[project]\nname = "x"\n'


def test_import_write_of_an_engine_the_recipe_has(tmp_path: Path) -> None:
    recipe = tmp_path / "trtls.toml"
    recipe.write_text('# engines\n\n[engines.m]\nonnx = "m.onnx"\n')
    record, _ = _one_record(("import", "trtexec", "--write", str(recipe), "--", "--onnx=m.onnx"), tmp_path)
    assert record["code"] == "TRT420" and "already exists" in record["message"], record
    assert record["file"] == str(recipe) and record["line"] == 3, record


def test_import_json_success_is_one_record(tmp_path: Path) -> None:
    done = _trtls("import", "trtexec", "--json", "--", "--onnx=m.onnx", "--saveEngine=m.engine", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    (line,) = done.stdout.splitlines()
    record = json.loads(line)
    assert record["type"] == "imported" and record["engine"] == "m" and "[engines.m]" in record["toml"], record
