"""A worker started parked (builds/worker/parked.py): `trtls build --engine NAME` starts it before it knows whether the
store serves the build, and it loads no builder and asks no driver until its start line comes; its input closing ends
it having done nothing. Real worker processes, observed through their memory maps."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from trtls.builds.supervisor.worker_launch import AHEAD_PRELOAD, drop_unadopted, start_now
from trtls.core.events import StartControl
from trtls.core.protocol import START_LINE

BUILDER_LIB = "libtensorrt_rtx"


def _maps(proc: subprocess.Popen[bytes]) -> str:
    try:
        return Path(f"/proc/{proc.pid}/maps").read_text()
    except OSError:
        return ""


def _until(cond: Callable[[], bool], what: str, bound_s: float = 120.0) -> None:
    """Wait for `cond` (a bound against a hang only: nothing here asserts how long it takes)."""
    end = time.monotonic() + bound_s
    while not cond():
        assert time.monotonic() < end, f"never: {what}"
        time.sleep(0.02)


def test_the_start_line_is_the_start_control_model_as_it_writes_itself() -> None:
    assert START_LINE == (StartControl().model_dump_json() + "\n").encode()
    assert StartControl.model_validate_json(START_LINE) == StartControl()


def test_a_parked_worker_loads_no_builder_until_its_start_line_and_then_loads_it() -> None:
    parked = start_now(AHEAD_PRELOAD, parked=True)
    control = None
    try:
        # a worker started after it, not parked, loads the builder's libraries while the parked one waits: once the
        # control has them mapped, the parked one, started first, would have too
        control = start_now(AHEAD_PRELOAD)
        _until(lambda: BUILDER_LIB in _maps(control), "the control worker loads the builder")
        assert parked.poll() is None, "the parked worker ended by itself"
        assert BUILDER_LIB not in _maps(parked), "a parked worker loaded the builder before its start line"
        if "libcudart" in _maps(control):  # the driver's probe where the runtime is installed
            assert "libcudart" not in _maps(parked)
        assert parked.stdin is not None
        parked.stdin.write(START_LINE)
        parked.stdin.flush()
        _until(lambda: BUILDER_LIB in _maps(parked), "the started worker loads the builder")
        parked.stdin.close()  # no job: the worker ends as any worker whose input closes before its job
        assert parked.wait(timeout=60) == 2
    finally:
        for proc in (parked, control):
            if proc is not None and proc.poll() is None:
                drop_unadopted(proc)


def test_a_parked_worker_whose_input_closes_ends_having_done_nothing() -> None:
    parked = start_now(AHEAD_PRELOAD, parked=True)
    try:
        assert parked.stdin is not None and parked.stdout is not None and parked.stderr is not None
        parked.stdin.close()
        assert parked.wait(timeout=60) == 0
        assert parked.stdout.read() == b"" and parked.stderr.read() == b""  # no event, no complaint
    finally:
        if parked.poll() is None:
            drop_unadopted(parked)


def test_a_parked_worker_refuses_a_first_line_that_is_not_its_start_line_and_prints_no_control_character() -> None:
    parked = start_now(AHEAD_PRELOAD, parked=True)
    try:
        assert parked.stdin is not None and parked.stderr is not None and parked.stdout is not None
        parked.stdin.write(b'{"type":"commit","v":1,"x":"\x1b[2J"}\n')  # a line out of order, carrying an escape
        parked.stdin.close()
        assert parked.wait(timeout=60) == 2
        err = parked.stderr.read().decode()
        assert "not a start line" in err and "\x1b" not in err and "\\x1b" in err, err
        assert parked.stdout.read() == b""
    finally:
        if parked.poll() is None:
            drop_unadopted(parked)
