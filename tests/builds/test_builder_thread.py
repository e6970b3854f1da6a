"""TensorRT builds on the worker's main thread, as a plain script does (issue 31): on a second thread its allocations
come from a glibc malloc arena of that thread's, and on the 16-core host that cost `large`'s builder 5–19 %
(docs/performance.md "The builder on the main thread"). The main thread is then busy inside TensorRT, where Python
runs no signal handler; SIGTERM, the stop's escalation, is acted on by the worker's signal thread instead. Real
workers: one builds `demo` with its build's thread recorded; one whose main thread is held where no Python code can
run (a C mutex locked twice by its owner) is sent SIGTERM."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from trtls.builds.artifacts import engine_temp_path

# The real worker's entry, with its build wrapped: `record` says which thread ran it; `hold` makes the engine's temp
# file (as a build that had started writing) and then blocks the build's thread inside C, GIL released, for good.
DRIVER = """
import ctypes, json, runpy, sys, threading
from pathlib import Path
from trtls.builds.worker import build
mode, note = sys.argv[1], Path(sys.argv[2])
real = build.Worker._build
def wrapped(self):
    on_main = threading.current_thread() is threading.main_thread()
    if mode == "record":
        note.write_text(json.dumps({"on_main": on_main}))
        return real(self)
    from trtls.builds.artifacts import engine_temp_path
    temp = engine_temp_path(self.output, self.build_id)
    temp.parent.mkdir(parents=True, exist_ok=True)
    temp.write_bytes(b"partial")
    mutex = ctypes.create_string_buffer(64)  # zeroed: glibc's PTHREAD_MUTEX_INITIALIZER, a normal mutex
    lock = ctypes.CDLL(None).pthread_mutex_lock
    lock(mutex)
    note.write_text(json.dumps({"on_main": on_main}))
    lock(mutex)  # its owner again: waits forever in C; a signal's C handler runs, no Python handler can
build.Worker._build = wrapped
sys.argv = ["trtls-worker"]
runpy.run_module("trtls.builds.worker", run_name="__main__")
"""


def _start(workspace: Path, tmp_path: Path, mode: str) -> tuple[subprocess.Popen[bytes], dict, Path]:
    from trtls.builds.supervisor.job import worker_job
    from trtls.core.recipe import load_recipe

    job = worker_job(load_recipe(workspace / "trtls.toml"), "demo", f"demo-thread-{mode}")
    note = tmp_path / f"{mode}.json"
    with open(tmp_path / f"{mode}.stderr", "wb") as err:  # a file: nobody need drain it while the test waits
        proc = subprocess.Popen(
            [sys.executable, "-c", DRIVER, mode, str(note)],
            stdin=subprocess.PIPE,  # kept open: its end would be a cancel (the supervisor gone)
            stdout=subprocess.PIPE,
            stderr=err,
            cwd=workspace,
        )
    assert proc.stdin is not None
    proc.stdin.write((json.dumps(job) + "\n").encode())
    proc.stdin.flush()
    return proc, job, note


def test_tensorrt_builds_on_the_workers_main_thread(workspace: Path, tmp_path: Path) -> None:
    proc, job, note = _start(workspace, tmp_path, "record")
    assert proc.stdout is not None
    out = proc.stdout.read()  # the worker closes its stdout after its last event
    assert proc.wait(120) == 0, (tmp_path / "record.stderr").read_text()[-2000:]
    events = [json.loads(line) for line in out.decode().splitlines() if line.strip()]
    assert events[-1]["type"] == "build_finished" and events[-1]["outcome"] == "built"
    assert json.loads(note.read_text()) == {"on_main": True}
    assert Path(job["output"]).stat().st_size > 0


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's pthread_mutex_lock through ctypes")
def test_sigterm_ends_a_worker_whose_main_thread_is_held_inside_c(workspace: Path, tmp_path: Path) -> None:
    proc, job, note = _start(workspace, tmp_path, "hold")
    temp = engine_temp_path(Path(job["output"]), job["build_id"])
    try:
        for _ in range(3000):  # a bound for a loaded machine; no timing asserted
            if note.exists() and note.stat().st_size:
                break
            if proc.poll() is not None:
                pytest.fail((tmp_path / "hold.stderr").read_text()[-2000:] + str(proc.stdout.read()[-2000:]))  # type: ignore[union-attr]
            subprocess.run(["sleep", "0.1"], check=False)
        assert json.loads(note.read_text()) == {"on_main": True}, (tmp_path / "hold.stderr").read_text()[-2000:]
        assert temp.exists()
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(60)  # held in C for good: only the signal thread can end it
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert code == 143
    assert not temp.exists(), "the escalation removes the temp engine the build had started"
    assert not Path(job["output"]).exists()


def test_the_build_environment_record_has_the_models_keys_and_no_arena_limit() -> None:
    """The worker sets no malloc policy now (its build is on the main thread); the record says so (null), with the
    model's keys in the model's order."""
    from trtls.core.build_records import BuildEnvironment

    done = subprocess.run(
        [sys.executable, "-m", "trtls.builds.worker", "--probe"],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    record = json.loads(done.stdout.splitlines()[-1])
    assert record["malloc_arena_max"] is None
    # `language`: an external worker's; `driver_unanswered`: only when the driver did not answer (a cuInit that hangs:
    # tests/builds/test_driver_unanswered.py holds that record's keys to the model's)
    declared = [k for k in BuildEnvironment.model_fields if k not in ("language", "driver_unanswered")]
    assert [k for k in record if k != "capabilities"] == declared, "the worker writes the model's keys, in order"
