"""The worker's pipes end before its exit (issue 31): the supervisor writes a build's evidence once the worker's stdout
and stderr reach end-of-file, and an exit gives that only after the kernel has unmapped the process — TensorRT's
libraries and the build's heap, ~15–20 ms on the 2-core machine (2026-12-04). The worker closes them once its last
event is written. A real worker builds `demo`; its `os._exit` is held (a driver wraps it) until the test has read
both pipes to their end: with the pipes closed only by the exit, they would not end while it is held."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

DRIVER = """
import os, runpy, sys, time
go = sys.argv[1]
real_exit = os._exit
def held_exit(code):
    while not os.path.exists(go):  # the test says when (a bound below, no timing asserted)
        time.sleep(0.01)
    real_exit(code)
os._exit = held_exit
sys.argv = ["trtls-worker"]
runpy.run_module("trtls.builds.worker", run_name="__main__")
"""


def test_the_workers_stdout_and_stderr_end_before_it_exits(workspace: Path, tmp_path: Path) -> None:
    from trtls.builds.supervisor.job import worker_job
    from trtls.core.recipe import load_recipe

    job = worker_job(load_recipe(workspace / "trtls.toml"), "demo", "demo-pipes-1")
    go = tmp_path / "go"
    proc = subprocess.Popen(
        [sys.executable, "-c", DRIVER, str(go)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ},
    )
    try:
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        proc.stdin.write((json.dumps(job) + "\n").encode())
        proc.stdin.flush()
        got: dict[str, bytes] = {}
        readers = [
            threading.Thread(target=lambda: got.update(out=proc.stdout.read()), daemon=True),  # type: ignore[union-attr]
            threading.Thread(target=lambda: got.update(err=proc.stderr.read()), daemon=True),  # type: ignore[union-attr]
        ]
        for r in readers:
            r.start()
        for r in readers:
            r.join(300)  # a bound for a loaded machine: with the pipes held open by the exit, never
        assert set(got) == {"out", "err"}, "the worker's pipes did not end while its exit was held"
        assert proc.poll() is None, "still alive (its exit held): the pipes ended before it"
        events = [json.loads(line) for line in got["out"].decode().splitlines() if line.strip()]
        assert events[-1]["type"] == "build_finished" and events[-1]["outcome"] == "built", got["err"][-2000:]
    finally:
        go.touch()
        proc.wait(120)
    assert proc.returncode == 0
