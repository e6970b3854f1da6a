"""The test hook that holds a process at a named point (`TRTLS_TEST_PAUSE=<point>:<folder>`): the worker before and
after its rename (builds/worker), the supervisor before a build's evidence is written (builds/supervisor/build_end.py),
the language server's readings of recorded runs and models (lsp/recorded_runs.py), the start of
a gate (`gate_<n>`, gates/run.py), the worker's k-th phase_start (`phase_start_<k>`, `held_phase`).
Its marker goes through the door like any file trtls writes; with the variable unset it is one environment lookup."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

from trtls.fs.kinds import Kind
from trtls.fs.write import atomic_write_text


def test_pause(
    point: str, build_id: str, until: Callable[[], bool] = lambda: False, marks: dict[str, str] | None = None
) -> None:
    """Test hook (`TRTLS_TEST_PAUSE=<point>:<folder>`): at `point`, write `<folder>/<build id>.<point>` (this process's
    pid) and `<folder>/<build id>.<name>` for each of `marks` (what a test needs to know of the moment: the thread
    holding, the file it reads), then wait until `<folder>/<build id>.go` exists or `until()`, so a test can kill a
    process, or ask it something, at an exact moment without sleeps."""
    name, _, folder = os.environ.get("TRTLS_TEST_PAUSE", "").partition(":")
    if name != point or not folder:
        return
    for mark, text in (marks or {}).items():
        atomic_write_text(Path(folder, f"{build_id}.{mark}"), text, kind=Kind.scratch, within=folder)
    atomic_write_text(Path(folder, f"{build_id}.{point}"), str(os.getpid()), kind=Kind.scratch, within=folder)
    go = Path(folder, f"{build_id}.go")
    deadline = time.monotonic() + 600
    while not go.exists() and not until() and time.monotonic() < deadline:
        time.sleep(0.01)


def held_phase() -> dict[str, object] | None:
    """Test hook (`TRTLS_TEST_PAUSE=phase_start_<k>:<folder>`): the worker's progress monitor holds inside the k-th
    phase_start callback until a stop is asked (at most 600 s), so a test's Ctrl-C lands inside the builder, before
    its next callback, however loaded the machine is — read once per build, not per callback."""
    name, _, _ = os.environ.get("TRTLS_TEST_PAUSE", "").partition(":")
    number = name.removeprefix("phase_start_")
    if number == name or not number.isdecimal():
        return None
    return {"at_phase": int(number), "until_cancel": True, "seconds": 600}
