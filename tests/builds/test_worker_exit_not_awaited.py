"""Once the worker's last event (build_finished) has come, the build's answer does not wait for the worker's exit (issue
31): on a GPU host without persistence mode the last process to close the driver pays the GPU's teardown (50–90 ms on
the H200 host, benchmarks/probe_cuda_exit.py), and every build's end waited for it. A real worker process that stays
alive after its last event, until the test lets it go."""

from __future__ import annotations

import asyncio
import json
import subprocess
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


def test_a_worker_reaped_after_its_loop_closed_prints_nothing(tmp_path: Path) -> None:
    """A CLI's loop closes once the build is answered, while the worker may still be exiting: asyncio's child watcher
    (a thread on Python 3.11) then reaps it with a WARNING "Loop … that handles pid … is closed", which would reach the
    person's terminal. A real process, reaped after its loop closed, in a real interpreter: nothing on stderr."""
    go = tmp_path / "go"
    code = f"""
import asyncio, os, sys, time
from trtls.builds.supervisor.spawn import reap_beside
async def main():
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", "import os, time\\nwhile not os.path.exists({str(go)!r}): time.sleep(0.01)")
    reap_beside(proc)
    return proc.pid
pid = asyncio.run(main())
open({str(go)!r}, "w").close()
for _ in range(6000):  # until the watcher has reaped it (no timing asserted)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        break
    time.sleep(0.01)
time.sleep(0.2)  # the watcher's own log call comes right after its waitpid
print("reaped")
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "reaped" and out.stderr == "", out.stderr
