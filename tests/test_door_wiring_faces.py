"""The door's refusals reach every face (issue 27): `trtls check` and the editor report a `[store] path` that is no
place for a store, `trtls gc` refuses a symlinked `.trtls/runs` with a located line, and the evidence readers say
what is wrong with a record instead of a traceback. Real `trtls` processes on real folders, links and FIFOs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.lsp.lsp_helpers import write_static_onnx

RECIPE = """\
[engines.demo]
onnx = "models/demo.onnx"
output = "build/demo.engine"
"""


def trtls(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "trtls", *args], cwd=cwd, capture_output=True, text=True, timeout=300)


def make_workspace(root: Path, head: str = "") -> Path:
    (root / "models").mkdir(parents=True)
    write_static_onnx(root / "models" / "demo.onnx")
    (root / "trtls.toml").write_text(head + RECIPE)
    return root


def test_check_refuses_store_path_on_recipe_folder(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path / "ws", '[store]\npath = "."\n\n')
    r = trtls("check", cwd=ws)
    assert r.returncode == 2, r.stdout + r.stderr
    out = r.stdout + r.stderr
    assert "trtls.toml:2:8: TRT339" in out, out  # located on the value of `path`
    assert "Traceback" not in out


def test_gc_refuses_symlinked_runs_and_leaves_the_target(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path / "ws")
    other = tmp_path / "other"
    old = other / "20200101-000000-aaaaaa"
    old.mkdir(parents=True)
    (old / "summary.json").write_text('{"buildId": "20200101-000000-aaaaaa", "startedAt": 0}')
    (ws / ".trtls").mkdir()
    (ws / ".trtls" / "runs").symlink_to(other)
    before = sorted(str(p.relative_to(other)) for p in other.rglob("*"))
    r = trtls("gc", "--keep-runs", "1", "--max-age-days", "1", cwd=ws)
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stderr.startswith(".trtls/runs: TRT118 "), r.stderr  # the path first, relative to the folder gc was given
    assert "Traceback" not in r.stderr
    assert sorted(str(p.relative_to(other)) for p in other.rglob("*")) == before


def test_trace_says_a_summary_that_is_no_regular_file(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path / "ws")
    runs = ws / ".trtls" / "runs"
    fifo_run, link_run = runs / "20260101-000000-aaaaaa", runs / "20260101-000000-bbbbbb"
    fifo_run.mkdir(parents=True)
    link_run.mkdir()
    os.mkfifo(fifo_run / "summary.json")
    (link_run / "summary.json").symlink_to("/dev/zero")
    for run, what in ((fifo_run, "a FIFO"), (link_run, "a symlink")):
        r = trtls("trace", run.name, cwd=ws)
        assert r.returncode == 2, r.stdout + r.stderr
        assert f"{run.name}/summary.json: not a regular file ({what})" in r.stderr, r.stderr
        assert "no such finished build" not in r.stderr and "Traceback" not in r.stderr


def test_evidence_error_is_said_instead_of_a_record_path(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A reuse, a reduction and the editor's row of a reduction whose record could not be written (TRT413,
    `evidenceError`): the error is shown, no summary.json/result.json is claimed, and the terminal exits 1."""
    from types import SimpleNamespace

    from trtls.app.triage_runs import ReductionRun
    from trtls.cli.reduce import _exit
    from trtls.cli.store_lookup import print_reused
    from trtls.core.triage_records import ReductionResult

    error = f"{tmp_path}/.trtls/runs/x/summary.json: TRT413 cannot write (Read-only file system)"
    reused = {"message": "reused", "engineArtifact": {"path": "build/demo.engine"}, "buildId": "x"}
    assert print_reused("demo", reused, tmp_path / "trtls.toml", False) == 0
    assert capsys.readouterr().out.endswith("/summary.json\n")
    assert print_reused("demo", {**reused, "evidenceError": error}, tmp_path / "trtls.toml", False) == 1
    out = capsys.readouterr().out
    assert f"  evidence: {error}\n" in out and not out.endswith("/summary.json\n")

    red = SimpleNamespace(stopped_by=None, folder=tmp_path / "red", id="r1", engine="demo", token=None)
    unwritten = ReductionResult.model_construct(outcome="reduced", evidenceError=error)
    written = ReductionResult.model_construct(outcome="reduced")
    assert _exit(written, red) == 0
    assert _exit(unwritten, red) == 1

    run = ReductionRun(red, loaded=None, runner=None, result=unwritten)
    assert run.error_text == error
    run_ok = ReductionRun(red, loaded=None, runner=None, result=written)
    assert run_ok.error_text is None
