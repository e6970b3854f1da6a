"""An early worker is the face's until a build takes it, and the build's after: a face's `discard` — which it calls
on every path where it thinks no build took its worker, a raised exception included — ends a worker no build took
and never one a running build owns (builds/supervisor/spawn.taken_by_build). Before this rule an exception raised in
the request after the supervisor started the build (the CLI's `except BaseException` in `_build_one`) would have
SIGKILLed a running build behind its supervisor's back.

Real early workers, a real TensorRT-RTX build of the quickstart's `demo`."""

from __future__ import annotations

import signal
from pathlib import Path

from trtls.builds.supervisor.spawn import discard, spawn_worker
from trtls.builds.supervisor.supervisor import Supervisor

from .helpers import loaded, process_gone


async def test_a_discard_after_the_handoff_leaves_the_running_build_its_worker(workspace: Path) -> None:
    early = await spawn_worker(preload="auto")
    build = Supervisor().start(loaded(workspace), "demo", worker=early)
    await discard(early)  # a face's cleanup on an error path after the build started
    assert early.returncode is None, "the face ended a worker its build owns"
    summary = await build.wait()
    assert summary.outcome == "built" and summary.workerPid == early.pid
    assert (workspace / "build" / "demo.engine").stat().st_size > 0
    assert process_gone(early.pid)


async def test_a_worker_no_build_took_is_ended_by_discard() -> None:
    early = await spawn_worker(preload="auto")
    await discard(early)
    assert early.returncode == -signal.SIGKILL, "a worker no build took is the face's to end, at once"
    assert process_gone(early.pid)
