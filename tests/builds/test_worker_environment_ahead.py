"""The worker asks for what its environment record needs before it has a job (issue 31, the fixed cost of a small
build): `platform.platform()` runs `uname -p` as a child process the first time, and that used to happen after the job
arrived, on the build's critical path. A real worker process, with an audit hook logging the children it starts; the
job is never sent, so the `uname` it starts is provably not waiting for one."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

DRIVER = """
import runpy, sys
log = open(sys.argv[1], "a", buffering=1)
def hook(event, args):
    if event == "subprocess.Popen":
        log.write(" ".join(str(a) for a in (args[1] or [])) + "\\n")
sys.addaudithook(hook)
sys.argv = ["trtls-worker"]
runpy.run_module("trtls.builds.worker", run_name="__main__")
"""


def test_the_worker_names_its_platform_before_it_is_sent_a_job(tmp_path: Path) -> None:
    log = tmp_path / "children.log"
    proc = subprocess.Popen(
        [sys.executable, "-c", DRIVER, str(log)],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=(tmp_path / "stderr").open("wb"),
    )
    try:
        deadline = time.monotonic() + 120  # a bound for a loaded machine, not a measurement
        seen = False
        while time.monotonic() < deadline and proc.poll() is None:
            if log.exists() and any(line.split()[:2] == ["uname", "-p"] for line in log.read_text().splitlines()):
                seen = True
                break
            time.sleep(0.05)
        assert seen, f"no `uname -p` before a job was sent; children: {log.read_text() if log.exists() else ''!r}"
    finally:
        assert proc.stdin is not None
        proc.stdin.close()  # no job: the worker ends without building
        proc.wait(timeout=120)
    assert proc.returncode == 2, (tmp_path / "stderr").read_text(errors="replace")
    # asked once, before the job: the record reads the cached answer
    assert [line for line in log.read_text().splitlines() if line.startswith("uname")] == ["uname -p"]


STARTS = """
import runpy, sys, threading
log = open(sys.argv[1], "a", buffering=1)
started = []
start = threading.Thread.start
def recording_start(self):
    started.append(self.name)
    start(self)
threading.Thread.start = recording_start
def hook(event, args):
    if event == "import" and args[0] == "trtls.builds.worker.main":
        log.write("threads started before the worker's modules: " + ",".join(started) + "\\n")
sys.addaudithook(hook)
sys.argv = ["trtls-worker"]
runpy.run_module("trtls.builds.worker", run_name="__main__")
"""


def test_the_worker_starts_its_cuda_driver_probe_before_its_own_modules_load(tmp_path: Path) -> None:
    log = tmp_path / "threads.log"
    proc = subprocess.run(
        [sys.executable, "-c", STARTS, str(log)],
        input=b"",
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr.decode(errors="replace")  # no job: it ends without building
    lines = log.read_text().splitlines()
    assert lines and "trtls-cuda-warm" in lines[0].split(": ", 1)[1].split(","), lines
