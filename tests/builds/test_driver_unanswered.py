"""A CUDA driver whose first call never returns (a wedged GPU, a driver mid-upgrade): `trtls build` ends, built, and
says the device is unknown, instead of waiting for it without end (builds/cuda.py `DRIVER_ANSWER_S`).

Before, the worker's environment record joined the driver's probe without a bound — and the build's events were held
behind that record — and both the CLI and the worker joined the probe again before ending, so such a build never
ended, and neither did a SIGTERM'd `trtls build` (it said "stopped" and stayed). The driver here is a real shared
library, compiled for the test and found by the loader as `libcuda.so.1` (LD_LIBRARY_PATH), whose `cuInit` never
returns; the bound is shortened for the test (`TRTLS_TEST_DRIVER_ANSWER_S`)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from trtls.builds import cuda
from trtls.core.build_records import BuildEnvironment
from trtls.store.key import KeyUnavailable, engine_key

HUNG_DRIVER = r"""
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
int cuDriverGetVersion(int *version) { *version = 13000; return 0; }
int cuInit(unsigned int flags) {
    /* HUNG_CUINIT_MARKS: a folder where each process that enters leaves a file named by its pid */
    const char *marks = getenv("HUNG_CUINIT_MARKS");
    (void)flags;
    if (marks) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%d", marks, (int)getpid());
        int fd = open(path, O_CREAT | O_WRONLY, 0644);
        if (fd >= 0) close(fd);
    }
    for (;;) pause();
    return 0;
}
"""
BOUND_S = "2"


@pytest.fixture
def hung_driver(tmp_path: Path) -> dict[str, str]:
    """The environment of a process whose `libcuda.so.1` hangs in `cuInit`, with the test's bound and a cache folder
    of its own (no account memo of a device answers for the driver)."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.fail("a C compiler (cc or gcc) is needed to make the hung driver; this machine's image has gcc")
    folder = tmp_path / "driver"
    folder.mkdir()
    (folder / "hung.c").write_text(HUNG_DRIVER)
    library = folder / "libcuda.so.1"
    subprocess.run([compiler, "-shared", "-fPIC", "-o", str(library), str(folder / "hung.c")], check=True)
    (tmp_path / "cache").mkdir()
    return {
        **os.environ,
        "LD_LIBRARY_PATH": str(folder),
        "TRTLS_TEST_DRIVER_ANSWER_S": BOUND_S,
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        "TRTLS_STORE": str(tmp_path / "store"),
    }


def _worker(env: dict[str, str], *, events: bool) -> subprocess.Popen[str]:
    """A build worker driven by hand, as a supervisor drives it (its job line, then control lines); `events`: its
    event stream read back (stdout), else dropped. Its log (stderr) is dropped: an unread pipe could fill, stall it."""
    return subprocess.Popen(
        [sys.executable, "-m", "trtls.builds.worker"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE if events else subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )


def test_a_build_whose_driver_never_answers_ends_built_and_says_the_device_unknown(
    workspace: Path, hung_driver: dict[str, str]
) -> None:
    cmd = [sys.executable, "-m", "trtls", "build", str(workspace), "--engine", "demo"]
    try:  # a bound for a hang, not a measurement: the old code never ended here
        done = subprocess.run(cmd, env=hung_driver, capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        pytest.fail("`trtls build` did not end while the CUDA driver's cuInit hung")
    assert done.returncode == 0, done.stderr
    assert (workspace / "build" / "demo.engine").is_file()
    (run,) = (workspace / ".trtls" / "runs").glob("demo-*")
    summary = json.loads((run / "summary.json").read_text())
    environment = summary["environment"]
    assert "had not answered (cuInit) within 2 s" in environment["driver_unanswered"]
    assert environment["device_name"] is None and environment["cuda_driver"] is None  # unknown, not guessed
    declared = [k for k in BuildEnvironment.model_fields if k != "language"]  # `language`: an external worker's
    assert list(environment) == declared, "the record's keys are the model's, in its order"
    # nothing is keyed on a device nobody could ask: nothing stored under it, nothing served from it
    assert summary["store"]["used"] is False and summary["store"]["key"] is None
    assert "no engine key: the CUDA driver had not answered" in summary["store"]["why"]
    assert not (Path(hung_driver["TRTLS_STORE"]) / "entries").exists() or not any(
        (Path(hung_driver["TRTLS_STORE"]) / "entries").iterdir()
    )
    # the events held behind the record went out after it: the phase tree is there, in order
    kinds = [json.loads(line)["type"] for line in (run / "events.jsonl").read_text().splitlines()]
    assert kinds.index("environment") < kinds.index("build_started") < kinds.index("phase_start")
    assert kinds[-1] == "build_finished"
    # the worker ended too (its probe thread still inside the driver: its exit runs no driver teardown)
    pid = summary["workerPid"]
    assert isinstance(pid, int) and not Path(f"/proc/{pid}").exists()


def test_a_stop_while_the_record_waits_for_the_driver_is_not_held_up_by_it(
    workspace: Path, hung_driver: dict[str, str], tmp_path: Path
) -> None:
    """A cancel while the worker's environment record waits for a hung driver (its builder running or about to): the
    record stops waiting and says why, the held events go out and the build ends cancelled — well inside a
    supervisor's grace, instead of at the driver's bound, after which a supervisor's escalation would have forced it
    (the worker driven by hand, as a supervisor drives it: its job line, then a cancel line)."""
    from trtls.builds.supervisor.job import worker_job
    from trtls.core.recipe import load_recipe

    marks = tmp_path / "entered-cuinit"
    marks.mkdir()
    env = {**hung_driver, "TRTLS_TEST_DRIVER_ANSWER_S": "15", "HUNG_CUINIT_MARKS": str(marks)}
    job = worker_job(load_recipe(workspace / "trtls.toml"), "large", "large-stopped-1")
    proc = _worker(env, events=True)
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write(json.dumps(job) + "\n")
        proc.stdin.flush()
        deadline = time.monotonic() + 120  # a bound for a loaded machine, not a measurement
        while not any(marks.iterdir()) and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.02)
        assert [m.name for m in marks.iterdir()] == [str(proc.pid)], "the worker did not ask the driver"
        proc.stdin.write(json.dumps({"v": 1, "type": "cancel", "source": "api"}) + "\n")
        proc.stdin.flush()
        events = [json.loads(line) for line in proc.stdout]
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    kinds = [e["type"] for e in events]
    assert "environment" in kinds and kinds[-1] == "build_finished", kinds
    said = events[kinds.index("environment")]["environment"]["driver_unanswered"]
    assert said == "the build was stopped before the CUDA driver answered (cuInit)"  # not the bound's 15 s
    assert events[-1]["outcome"] == "cancelled" and "cancel_acknowledged" in kinds


def test_a_worker_whose_driver_never_answers_ends_when_it_gets_no_job(hung_driver: dict[str, str]) -> None:
    """No job (its supervisor gone before sending one): the worker ends with code 2, its driver probe still stuck."""
    proc = _worker(hung_driver, events=False)
    assert proc.stdin is not None
    proc.stdin.close()
    try:  # a bound for a hang, not a measurement
        proc.wait(timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail("the worker did not end while the CUDA driver's cuInit hung")
    assert proc.returncode == 2


ASK_TWICE = """
import json, threading
from trtls.builds import cuda
from trtls.core.build_records import BuildEnvironment
first = cuda.cuda_driver()
second = cuda.cuda_driver()  # the stuck probe's bound long past: answered at once, by the same probe
inside = [t.name for t in threading.enumerate() if t.name == "trtls-cuda-warm"]
print(json.dumps({"first": first, "second": second, "inside": inside}))
"""


def test_the_driver_is_asked_once_while_it_hangs_and_the_record_says_so(hung_driver: dict[str, str]) -> None:
    done = subprocess.run(
        [sys.executable, "-c", ASK_TWICE], env=hung_driver, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    assert (
        got["first"]
        == got["second"]
        == cuda.unanswered()
        | {"driver_unanswered": "the CUDA driver had not answered (cuInit) within 2 s of being asked"}
    )
    assert got["inside"] == ["trtls-cuda-warm"], "a second thread went into the stuck driver"


def test_an_unanswered_device_keys_nothing(workspace: Path) -> None:
    job = {"onnx": str(workspace / "models" / "demo.onnx"), "settings": {}, "builder_module": "auto"}
    answered = engine_key(job, None, {"cuda_driver": None, "device_name": None, "compute_capability": None})
    assert answered.hex
    with pytest.raises(KeyUnavailable, match="had not answered"):
        engine_key(job, None, cuda.unanswered())
