"""The worker's last look before it renames a new engine over the output: is anyone still supervising this build?

A supervisor that died (a SIGKILLed `trtls build`, a language server the OOM killer took) will never record what the
worker does next. Renaming a new engine over the old one then would leave an output that no evidence describes, so
the worker discards it: the next build's orphan recovery finds the output exactly as this build found it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

from trtls.fs import Kind, atomic_write_text


class SupervisorGone(OSError):
    """The supervising process died before the engine was renamed over the output (an OSError: the writer's own
    clean-up of its temp file covers it)."""


class SupervisorWatch:
    """Gone when stdin reached EOF (`gone`, set by the control thread) or this process was re-parented."""

    def __init__(self) -> None:
        self.parent_pid = os.getppid()
        self.gone = False

    def is_gone(self) -> bool:
        return self.gone or os.getppid() != self.parent_pid

    def check(self, build_id: str) -> Callable[[], None]:
        """The `before_rename` callback of `artifacts.write_engine`: raises SupervisorGone when nobody supervises."""

        def before_rename() -> None:
            test_pause("before_rename", build_id, self.is_gone)
            if self.is_gone():
                raise SupervisorGone(
                    "the supervising process died before the engine was renamed over the output: the new engine was "
                    "discarded (its temp file removed) and the output was not touched"
                )

        return before_rename


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
