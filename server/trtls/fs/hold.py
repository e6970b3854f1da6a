"""The test hook that holds a process at a named point (`TRTLS_TEST_PAUSE=<point>:<folder>`): the worker before and
after its rename (builds/worker), the supervisor before a build's evidence is written (builds/supervisor/build_end.py).
Its marker goes through the door like any file trtls writes; with the variable unset it is one environment lookup."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

from trtls.fs.kinds import Kind
from trtls.fs.write import atomic_write_text


def test_pause(point: str, build_id: str, until: Callable[[], bool] = lambda: False) -> None:
    """Test hook (`TRTLS_TEST_PAUSE=<point>:<folder>`): at `point`, write `<folder>/<build id>.<point>` and wait until
    `<folder>/<build id>.go` exists or `until()`, so a test can kill a process at an exact moment without sleeps."""
    name, _, folder = os.environ.get("TRTLS_TEST_PAUSE", "").partition(":")
    if name != point or not folder:
        return
    atomic_write_text(Path(folder, f"{build_id}.{point}"), str(os.getpid()), kind=Kind.scratch, within=folder)
    go = Path(folder, f"{build_id}.go")
    deadline = time.monotonic() + 600
    while not go.exists() and not until() and time.monotonic() < deadline:
        time.sleep(0.01)
