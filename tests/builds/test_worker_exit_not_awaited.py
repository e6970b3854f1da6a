"""Once the worker's last event (build_finished) has come, the build's answer does not wait for the worker's exit (issue
31): on a GPU host without persistence mode the last process to close the driver pays the GPU's teardown (50–90 ms on
the H200 host, benchmarks/probe_cuda_exit.py), and every build's end waited for it. A real worker process that stays
alive after its last event, until the test lets it go."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

from trtls.builds.supervisor.supervisor import Supervisor
from trtls.core.recipe import load_recipe

WORKER = Path(__file__).parents[1] / "data" / "external_worker.py"


async def test_the_evidence_does_not_wait_for_a_worker_that_reported_its_end_to_exit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The build is answered while its worker is still alive, `workerExitCode` null (nothing measured it), and the
    worker is reaped beside once it exits, with the exit it took."""
    go = tmp_path / "go"
    monkeypatch.setenv("LINGER_UNTIL", str(go))  # the worker's exit waits for this file
    (tmp_path / "trtls.toml").write_text(
        f'[engines.svc]\nonnx = "none.onnx"\noutput = "out/svc.engine"\nworker = ["{sys.executable}", "{WORKER}"]\n'
    )
    supervisor = Supervisor()
    build = supervisor.start(load_recipe(tmp_path / "trtls.toml"), "svc")
    await asyncio.wait_for(build.wait(), 60)  # a bound, not a timing: a wait for the exit would never end
    (path,) = (tmp_path / ".trtls" / "runs").glob("*/summary.json")
    summary = json.loads(path.read_text())
    assert summary["outcome"] == "built" and summary["workerExitCode"] is None
    assert build.pid is not None and _alive(build.pid), "answered while the worker was still there"
    (exiting,) = supervisor.reaping
    go.touch()
    assert await asyncio.wait_for(exiting, 60) == 7, "reaped beside, with the exit it took"
    assert not supervisor.reaping


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(") ")[1][0] != "Z"  # a zombie has exited
    except FileNotFoundError:
        return False
