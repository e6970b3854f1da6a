"""A build's own records stay in the recipe's folder, checked when each is written (issue 27, item 10 for the
supervisor's records): `.trtls/runs` swapped for a symlink while the build runs gets nothing written through it, and
the build says TRT413 on its engine instead of a traceback.

A real supervisor and a real worker process (a recipe's own worker command, tests/data/external_worker.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from trtls.builds.supervisor.outcome_findings import build_findings
from trtls.builds.supervisor.supervisor import Supervisor
from trtls.core.recipe import load_recipe

WORKER = Path(__file__).parents[1] / "data" / "external_worker.py"


async def test_runs_swapped_for_a_symlink_mid_build_is_trt413_and_nothing_is_written_through_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STEPS", "40")
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "trtls.toml").write_text(
        f'[engines.svc]\nonnx = "none.onnx"\noutput = "out/svc.engine"\nworker = ["{sys.executable}", "{WORKER}"]\n'
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    build = Supervisor().start(load_recipe(ws / "trtls.toml"), "svc")
    (elsewhere / build.id).mkdir()  # what the swapped link leads to: another project's folder of that name
    swapped: list[bool] = []

    def swap(b, ev) -> None:
        if ev is not None and ev.type == "step" and not swapped:
            (ws / ".trtls" / "runs").rename(ws / ".trtls" / "runs-moved")
            (ws / ".trtls" / "runs").symlink_to(elsewhere)
            swapped.append(True)

    build.listeners.append(swap)
    s = await build.wait()
    assert swapped and s.outcome == "built"  # the engine was placed; only its records could not be written
    assert s.evidenceError.startswith("TRT413 ") and "summary.json" in s.evidenceError
    assert list((elsewhere / build.id).iterdir()) == [], "a record was written through the swapped .trtls/runs"
    (finding,) = [f for f in build_findings(s) if f.code == "TRT413"]
    assert "summary.json" in finding.message and finding.path == ("engines", "svc")
    assert (ws / "out" / "svc.engine").read_bytes() == b"engine from an external worker"
