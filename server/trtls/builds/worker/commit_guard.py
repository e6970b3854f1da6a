"""The worker's last look before it renames a new engine over the output: is anyone still supervising this build,
and, for a job sent ahead of the supervisor's check, has the supervisor said the engine may be written?

A supervisor that died (a SIGKILLed `trtls build`, a language server the OOM killer took) will never record what the
worker does next. Renaming a new engine over the old one then would leave an output that no evidence describes, so
the worker discards it: the next build's orphan recovery finds the output exactly as this build found it.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable

from trtls.fs.hold import test_pause


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


class CommitGate:
    """A job sent before the supervisor checked the recipe (`hold_commit`, builds/supervisor/speculation.py) builds
    at once but writes nothing — no engine temp, no rename, no timing cache — until the supervisor's `commit` line
    (`allow`, from the control thread). Any other job is allowed from the start."""

    def __init__(self, held: bool) -> None:
        self.allowed = threading.Event()
        if not held:
            self.allowed.set()

    def allow(self) -> None:
        self.allowed.set()

    def never_allowed(self, stopped: Callable[[], bool]) -> bool:
        """Wait for the commit; True when it never came: `stopped()` (a cancel — a job that did not match, a store
        hit, a refusal, Ctrl-C — or the supervisor gone) ended the wait."""
        while not self.allowed.wait(0.02):
            if stopped():
                return True
        return False
