"""TensorRT's log, filtered in C++ and read back through a pipe: `NativeLogRelay`.

Why not a Python ``ILogger``: TensorRT calls a custom logger for every message, VERBOSE included (a custom
``ILogger`` has no minimum severity), and each call re-takes the GIL on the builder thread: 12,582 calls in a
`demo` build, 32,705 while *parsing* `large` alone. TensorRT's built-in ``Logger(min_severity)`` filters before
any Python runs and writes ``[date] [TRT] [X] message`` to fd 1. The worker already keeps its events on a private
copy of stdout (``emitter.EventWriter``), so fd 1 is free: it becomes a pipe whose reader thread frames those
messages (``LogFramer``) and calls ``on_log(severity, message)``. Anything else written to fd 1 is passed on to
stderr unchanged.

How TensorRT-RTX 1.7 writes one message (strace): about fifteen ``write(1, …)`` calls — the prefix in pieces
(``[``, ``12``, ``/`` … ``] ``, ``[TRT] [E] ``), the message text in one write *with its own newlines in it*, then
``\\n`` alone. A pipe read can end between any two of them, so a read boundary is not a message boundary, and a line
boundary is not one either: a message ends only where the next one starts, at a sync marker, or when the pipe has
gone quiet after a complete line (``IDLE_S``; the text is one write, so a complete line after it means its closing
``\\n`` has arrived — only a text longer than a pipe's atomic write, 4 KiB, could in theory be cut there).

The messages arrive on another thread, a little after the call that logged them. A caller that must see what one
call logged (the timing-cache check, a setting TensorRT refuses, the error after a failed build) calls ``sync()``
first: it writes a marker into the same pipe and waits until the reader has delivered every message that ended
before it. The marker may land inside a message another thread is writing: it is cut out of the byte stream
wherever it falls, and that message goes on.

Standard library only (and ``core.terminal_text``); the TensorRT module comes in through ``BuilderModule``
(``adapter`` imports it). TensorRT's messages go to ``on_log`` as they are (the worker sends them as JSON events,
escaped by the encoder; each face escapes them where it prints them); the lines a library printed that the relay
passes on to stderr are made terminal-safe here, where they become text for people.
"""

from __future__ import annotations

import itertools
import os
import re
import select
import threading
from collections.abc import Callable
from typing import Any

from trtls.core.terminal_text import terminal_safe

# The built-in logger's severity letters ("[F]" is INTERNAL_ERROR), read from the bindings' strings.
LETTERS = {"F": "INTERNAL_ERROR", "E": "ERROR", "W": "WARNING", "I": "INFO", "V": "VERBOSE"}
_LINE = re.compile(r"^\[[^\]]*\] \[TRT\] \[([FEWIV])\] ?(.*)$", re.DOTALL)
_MARK = b"\x00trtls-log-sync "  # NUL: TensorRT's text never has one, so a marker is found wherever it lands
_MARK_END = re.compile(rb"(\d+)\n")
SYNC_TIMEOUT_S = 5.0
IDLE_S = 0.05  # quiet time after a complete line before the open message is delivered (live warnings)


class LogFramer:
    """Bytes from the pipe in, whole messages out. Pure: no threads, no fds (tested on its own and under load).

    ``feed`` returns what became complete, in order: ``("log", severity, text)``, ``("other", line)`` for a line
    that is not TensorRT's, ``("mark", n)`` once every message that ended before marker ``n`` is out."""

    def __init__(self) -> None:
        self._partial = b""  # the line being written: no "\n" yet
        self._severity = ""
        self._message: list[str] | None = None  # the open message's lines
        self._waiting: list[int] = []  # markers that landed mid-line: decided when that line ends
        self._held = b""  # the start of a marker the read cut off

    def feed(self, data: bytes) -> list[tuple]:
        out: list[tuple] = []
        data, self._held = self._held + data, b""
        while data:
            at = data.find(b"\x00")
            if at < 0:
                self._text(data, out)
                break
            self._text(data[:at], out)
            rest = data[at:]
            end = _MARK_END.match(rest, len(_MARK)) if rest.startswith(_MARK) else None
            if end is not None:
                self._mark(int(end.group(1)), out)
                data = rest[end.end() :]
            elif _MARK.startswith(rest[: len(_MARK)]) and b"\n" not in rest:
                self._held = rest  # a marker cut by the read (it is one small write: only in theory)
                break
            else:
                self._text(rest[:1], out)  # a NUL some library printed: text like any other
                data = rest[1:]
        return out

    @property
    def open(self) -> bool:
        """Something waits for the pipe to go quiet: an open message or a marker inside a half-written line."""
        return self._message is not None or bool(self._waiting)

    def idle(self) -> list[tuple]:
        """The pipe has been quiet: a message whose last line is complete has been written whole."""
        out: list[tuple] = []
        if not self._partial:
            self._close_message(out)
        self._release(out)  # a line left half-written must not hold sync() to its timeout
        return out

    def close(self) -> list[tuple]:
        out: list[tuple] = []
        if self._partial:
            self._line(self._partial, out)
            self._partial = b""
        self._close_message(out)
        self._release(out)
        return out

    def _text(self, data: bytes, out: list[tuple]) -> None:
        *lines, self._partial = (self._partial + data).split(b"\n")
        for line in lines:
            self._line(line, out)
            self._release(out)

    def _mark(self, mark: int, out: list[tuple]) -> None:
        if self._partial:
            # Another thread is mid-line: whether the open message ended before the marker is known when that
            # line ends (a new message's prefix: yes; more of the open one: it was still being written).
            self._waiting.append(mark)
            return
        self._close_message(out)
        out.append(("mark", mark))

    def _line(self, raw: bytes, out: list[tuple]) -> None:
        line = raw.decode("utf-8", "replace")
        match = _LINE.match(line)
        if match:
            self._close_message(out)
            self._severity, self._message = LETTERS[match.group(1)], [match.group(2)]
        elif self._message is not None:
            self._message.append(line)
        else:
            out.append(("other", line))

    def _release(self, out: list[tuple]) -> None:
        out.extend(("mark", mark) for mark in self._waiting)
        self._waiting = []

    def _close_message(self, out: list[tuple]) -> None:
        if self._message is not None:
            out.append(("log", self._severity, "\n".join(self._message)))
            self._message = None


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
        os.write(1, _MARK + f"{mark}\n".encode())
        with self._seen_changed:
            self._seen_changed.wait_for(lambda: self._seen >= mark, timeout=SYNC_TIMEOUT_S)

    def _read(self) -> None:
        framer = LogFramer()
        poller = select.poll()
        poller.register(self._read_fd, select.POLLIN)
        waited = False  # an idle pass changed nothing (a half-written line holds the message): wait for data
        while True:
            if not poller.poll(IDLE_S * 1000 if framer.open and not waited else None):
                self._dispatch(framer.idle())
                waited = True
                continue
            waited = False
            chunk = os.read(self._read_fd, 1 << 16)
            if not chunk:
                break
            self._dispatch(framer.feed(chunk))
        self._dispatch(framer.close())

    def _dispatch(self, items: list[tuple]) -> None:
        for item in items:
            if item[0] == "log":
                try:
                    self.on_log(item[1], item[2])
                except Exception:
                    pass  # a failing consumer must not stop the relay (the build would lose every later error)
            elif item[0] == "mark":
                with self._seen_changed:
                    self._seen = max(self._seen, item[1])
                    self._seen_changed.notify_all()
            else:
                # not TensorRT's: what a library printed goes where it would, its control characters made visible
                # (stderr is read by people: a model's names must not move their cursor or write their clipboard)
                os.write(2, (terminal_safe(item[1]) + "\n").encode("utf-8", "replace"))


_PROCESS_RELAY: NativeLogRelay | None = None


def process_relay(trt: Any, on_log: Callable[[str, str], None]) -> NativeLogRelay:
    """The process's one relay (fd 1 is process-wide), now delivering to ``on_log``: a worker runs one build,
    but a test may run several builds in one process."""
    global _PROCESS_RELAY
    if _PROCESS_RELAY is None:
        _PROCESS_RELAY = NativeLogRelay(trt, on_log)
    _PROCESS_RELAY.on_log = on_log
    return _PROCESS_RELAY
