"""`trtls build` as a new user first meets it: wrong files, wrong options, empty recipes, scripts reading --json.

Each test runs the real CLI in a child process and fails on the behaviour issue 14 found: a traceback for an
ONNX file, a timeout of -1 that starts and cancels a build, "no engine named (any)", nothing on stdout in JSON
mode, the top-level usage for a bad build option, help without exit codes or option texts, errors out of order."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import QUICKSTART


def trtls(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "trtls", *args], cwd=cwd, capture_output=True, text=True, timeout=120)


def no_traceback(r: subprocess.CompletedProcess) -> None:
    assert "Traceback" not in r.stderr and "Error:" not in r.stderr.split(":", 1)[0], r.stderr


@pytest.mark.parametrize("content", [b"\x08\x07\x12\x04onnx\x80\xff\xfe binary", b"just some text, not toml = = ["])
def test_a_file_that_is_not_a_recipe_is_exit_2_with_a_message(tmp_path: Path, content: bytes) -> None:
    model = tmp_path / "models" / "model.onnx"
    model.parent.mkdir()
    model.write_bytes(content)
    r = trtls("build", str(model))
    assert r.returncode == 2, r.stderr
    no_traceback(r)
    assert str(model) in r.stderr and "TRT10" in r.stderr
    if content.startswith(b"\x08"):
        assert "not a TOML recipe" in r.stderr


def test_an_onnx_file_in_json_mode_is_a_json_error_line(tmp_path: Path) -> None:
    model = tmp_path / "model.onnx"
    model.write_bytes(b"\x08\x07\x12\x04onnx\x80\xff\xfe")
    r = trtls("build", str(model), "--json")
    assert r.returncode == 2
    lines = [json.loads(line) for line in r.stdout.splitlines()]
    assert lines and all(line["type"] == "error" for line in lines)
    assert lines[0]["file"] == str(model) and lines[0]["code"].startswith("TRT10") and lines[0]["message"]


@pytest.mark.parametrize("value", ["-1", "0", "nan", "inf", "soon"])
def test_timeout_must_be_a_positive_number_of_seconds(workspace: Path, value: str) -> None:
    r = trtls("build", str(workspace), "--engine", "demo", f"--timeout={value}")
    assert r.returncode == 2, (r.stdout, r.stderr)
    no_traceback(r)
    assert "--timeout" in r.stderr and "usage: trtls build" in r.stderr
    assert not r.stdout.strip() and not (workspace / ".trtls").exists(), "no build started"


def test_an_empty_recipe_says_what_to_add(tmp_path: Path) -> None:
    (tmp_path / "trtls.toml").write_text("")
    r = trtls("build", str(tmp_path))
    assert r.returncode == 2
    assert "(any)" not in r.stderr and "no engine named" not in r.stderr
    assert "no [engines.NAME] table" in r.stderr and str(tmp_path / "trtls.toml") in r.stderr


def test_a_bad_recipe_in_json_mode_prints_each_error_as_a_json_line(tmp_path: Path) -> None:
    (tmp_path / "trtls.toml").write_text(
        '[engines.a]\nonnx = "m.onnx"\noutput = "a.engine"\n\n[engines.a.builder]\noptimization_level = 9\nbogus = 1\n'
    )
    r = trtls("build", str(tmp_path), "--json")
    assert r.returncode == 2
    errors = [json.loads(line) for line in r.stdout.splitlines()]
    assert len(errors) >= 2 and {e["type"] for e in errors} == {"error"}
    assert {"TRT102", "TRT101"} <= {e["code"] for e in errors}
    for e in errors:
        assert e["file"] == str(tmp_path / "trtls.toml") and e["line"] >= 1 and e["col"] >= 1 and e["severity"]
    assert r.stderr.count("TRT10") >= 2, "the text errors stay on stderr for people"


def test_usage_errors_in_json_mode_are_json_lines_too(tmp_path: Path) -> None:
    r = trtls("build", str(tmp_path), "--json", "--timeout=-1")
    assert r.returncode == 2
    (line,) = [json.loads(x) for x in r.stdout.splitlines()]
    assert line["type"] == "error" and line["code"] == "TRT420" and "--timeout" in line["message"]


def test_errors_are_listed_in_file_order(tmp_path: Path) -> None:
    (tmp_path / "trtls.toml").write_text(
        "[engines.b]\n"
        'onnx = "m.onnx"\n'
        'output = "b.engine"\n'
        "cancel_grace_s = -3\n"
        "\n"
        "[engines.a]\n"
        'onnx = "m.onnx"\n'
        'output = "a.engine"\n'
        "[engines.a.builder]\n"
        "optimization_level = 9\n"
        "\n"
        "[engines.b.builder]\n"
        "optimization_level = 11\n"
    )
    r = trtls("build", str(tmp_path))
    assert r.returncode == 2
    located = [line.split(":")[1:3] for line in r.stderr.splitlines() if line.startswith(str(tmp_path))]
    positions = [(int(a), int(b)) for a, b in located]
    assert len(positions) >= 3 and positions == sorted(positions), r.stderr


def test_a_bad_build_option_prints_builds_usage() -> None:
    r = trtls("build", str(QUICKSTART), "--bogus")
    assert r.returncode == 2
    assert "usage: trtls build" in r.stderr and "unrecognized arguments: --bogus" in r.stderr


def _parsers() -> list[tuple[str, argparse.ArgumentParser]]:
    from trtls.cli.main import make_parser

    out = []
    todo = [("trtls", make_parser())]
    while todo:
        name, parser = todo.pop()
        out.append((name, parser))
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                todo.extend((f"{name} {sub}", p) for sub, p in action.choices.items())
    return out


def test_every_option_has_help_text() -> None:
    missing = [
        f"{name} {'/'.join(a.option_strings) or a.dest}"
        for name, parser in _parsers()
        for a in parser._actions
        if not isinstance(a, argparse._SubParsersAction) and not (a.help and a.help.strip())
    ]
    assert missing == []


def test_every_command_help_lists_its_exit_codes() -> None:
    leaves = [(n, p) for n, p in _parsers() if not any(isinstance(a, argparse._SubParsersAction) for a in p._actions)]
    assert len(leaves) >= 8
    lacking = [name for name, parser in leaves if "exit codes" not in (parser.epilog or "").lower()]
    assert lacking == []
    r = trtls("build", "--help")
    assert "exit codes: 0 built, 1 failed, 2 bad input, 124" in " ".join(r.stdout.split())
