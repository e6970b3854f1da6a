"""TensorRT's log, filtered in C++ and read back through a pipe: `NativeLogRelay`.

Why not a Python ``ILogger``: TensorRT calls a custom logger for every message, VERBOSE included (a custom
``ILogger`` has no minimum severity), and each call re-takes the GIL on the builder thread: 12,582 calls in a
`demo` build, 32,705 while *parsing* `large` alone. TensorRT's built-in ``Logger(min_severity)`` filters before
any Python runs and writes one flushed ``[date] [TRT] [X] message`` line per message to fd 1. The worker already
keeps its events on a private copy of stdout (``emitter.EventWriter``), so fd 1 is free: it becomes a pipe whose
reader thread parses those lines and calls ``on_log(severity, message)``. Anything else written to fd 1 is passed
on to stderr unchanged.

The messages now arrive on another thread, a little after the call that logged them. A caller that must see what
one call logged (the timing-cache check, a setting TensorRT refuses, the error after a failed build) calls
``sync()`` first: it writes a marker into the same pipe and waits until the reader has passed it.

Standard library only; the TensorRT module comes in through ``BuilderModule`` (``adapter`` imports it).
"""

from __future__ import annotations

import itertools
import os
import re
import threading
from collections.abc import Callable
from typing import Any

# The built-in logger's severity letters ("[F]" is INTERNAL_ERROR), read from the bindings' strings.
LETTERS = {"F": "INTERNAL_ERROR", "E": "ERROR", "W": "WARNING", "I": "INFO", "V": "VERBOSE"}
_LINE = re.compile(r"^\[[^\]]*\] \[TRT\] \[([FEWIV])\] ?(.*)$")
_MARK = "\x00trtls-log-sync "
SYNC_TIMEOUT_S = 5.0


class NativeLogRelay:
    """Owns fd 1 for the life of the worker: one relay per process."""

    def __init__(self, trt: Any, on_log: Callable[[str, str], None], min_severity: str = "WARNING"):
        self.on_log = on_log
        self.logger = trt.Logger(trt.Logger.Severity.__members__[min_severity])
        read_fd, write_fd = os.pipe()
        os.dup2(write_fd, 1)
        os.close(write_fd)
        self._read_fd = read_fd
        self._marks = itertools.count()
        self._seen = -1
        self._seen_changed = threading.Condition()
        threading.Thread(target=self._read, name="trtls-log-relay", daemon=True).start()

    def sync(self) -> None:
        """Return once every message logged before this call has been passed to ``on_log``."""
        mark = next(self._marks)
        os.write(1, f"{_MARK}{mark}\n".encode())
        with self._seen_changed:
            self._seen_changed.wait_for(lambda: self._seen >= mark, timeout=SYNC_TIMEOUT_S)

    def _read(self) -> None:
        pending = b""
        while chunk := os.read(self._read_fd, 1 << 16):
            *lines, pending = (pending + chunk).split(b"\n")
            self._deliver([line.decode("utf-8", "replace") for line in lines])
        if pending:
            self._deliver([pending.decode("utf-8", "replace")])

    def _deliver(self, lines: list[str]) -> None:
        # A message with newlines in it arrives as one line with the prefix and continuation lines without one:
        # within one read they are joined back into one message.
        current: list[str] | None = None
        severity = ""
        for line in lines:
            if line.startswith(_MARK):
                self._flush(severity, current)
                current = None
                with self._seen_changed:
                    self._seen = int(line[len(_MARK) :])
                    self._seen_changed.notify_all()
                continue
            match = _LINE.match(line)
            if match:
                self._flush(severity, current)
                severity, current = LETTERS[match.group(1)], [match.group(2)]
            elif current is not None:
                current.append(line)
            else:
                os.write(2, (line + "\n").encode())  # not TensorRT's: what a library printed goes where it would
        self._flush(severity, current)

    def _flush(self, severity: str, message: list[str] | None) -> None:
        if message is None:
            return
        try:
            self.on_log(severity, "\n".join(message))
        except Exception:
            pass  # a failing consumer must not stop the relay (the build would lose every later error)


_PROCESS_RELAY: NativeLogRelay | None = None


def process_relay(trt: Any, on_log: Callable[[str, str], None]) -> NativeLogRelay:
    """The process's one relay (fd 1 is process-wide), now delivering to ``on_log``: a worker runs one build,
    but a test may run several builds in one process."""
    global _PROCESS_RELAY
    if _PROCESS_RELAY is None:
        _PROCESS_RELAY = NativeLogRelay(trt, on_log)
    _PROCESS_RELAY.on_log = on_log
    return _PROCESS_RELAY
