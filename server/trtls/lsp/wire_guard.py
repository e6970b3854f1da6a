"""What the server does with bad input on the wire and with errors it cannot answer, so that neither a hostile
client nor the end of the session turns into popups or floods of tracebacks.

- Out-of-band errors (a malformed frame, a cancel with a dict for a token, a notification whose params do not fit)
  are one log line on stderr, never `window/showMessage` "Error in server": the client sent them, the user can do
  nothing about them, and pygls' default popup for each one is what a fuzzer or a buggy client turns into a storm.
- pygls logs every failed request with its traceback (`logger.exception`), an invalid-params error included: a
  refusal of bad input is one line; a traceback is kept only when the exception passed through trtls's own code
  and is not a JSON-RPC error (a bug of ours, worth its traceback).
- Why the server once wrote 18,721 `I/O operation on closed file` tracebacks after `exit`: pygls closes stdout on
  `exit`; any notification sent after that (a build ending, a relay's last state) failed in `_send_data`, which
  logged the traceback and called `report_server_error`, whose default *sends* a showMessage — through the same
  closed stdout, failing again, recursing until RecursionError: ~200 tracebacks per late notification (measured:
  one `notify` after close → 198). `ClosedSafeStdout` drops writes once stdout is closed (one log line), and
  `report_server_error` never sends anything, so the recursion cannot start.
- `exit` ends the process, always. pygls ends it by unwinding its event loop and joining its threads; one left
  blocked (a read of stdin the client keeps open, a build's thread) would keep a server the client has let go of
  alive forever, and the client (an editor, or a test that waits for the process) waits with it.
  `exit_no_later_than` is the bound: a daemon thread that ends the process with `exit`'s own code if it is still
  there `EXIT_BOUND_S` later (builds were stopped at `shutdown`; what they wrote is on disk by then). The code is the
  protocol's (0 after `shutdown`, 1 without) on the normal path too: pygls 2.1.1 raises it inside its loop, and its
  own `start_io` swallows the SystemExit, so the process ended 0 either way; `serve` ends with `exit_code`.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from types import TracebackType
from typing import TYPE_CHECKING, BinaryIO

from trtls.core.terminal_text import terminal_safe  # the standard library's `re` alone

if TYPE_CHECKING:
    from pygls.server import ServerErrors

log = logging.getLogger("trtls")

EXIT_BOUND_S = 10.0
exit_code = 0  # set by `exit` (exit_no_later_than); what `serve` ends with


def exit_no_later_than(code: int, seconds: float = EXIT_BOUND_S) -> threading.Thread:
    """After `exit`: end the process with `code` if the normal unwinding has not within `seconds` (module doc)."""
    global exit_code
    exit_code = code

    def bound() -> None:
        time.sleep(seconds)
        log.warning("trtls: still running %.0f s after exit; ending the process", seconds)
        os._exit(code)

    watchdog = threading.Thread(target=bound, name="trtls-exit-bound", daemon=True)
    watchdog.start()
    return watchdog


class ClosedSafeStdout:
    """stdout for pygls' writer: after `close()` (pygls' `exit`) or a failed write, later writes are dropped."""

    def __init__(self, stream: BinaryIO) -> None:
        self._stream = stream
        self.closed = False
        self.dropped = 0

    def write(self, data: bytes) -> int:
        if self.closed:
            self._drop()
            return 0
        try:
            return self._stream.write(data)
        except (ValueError, OSError) as exc:  # closed underneath us, or the client went away
            self.closed = True
            log.warning("trtls: the client's stdout is gone (%s); nothing more is sent", exc)
            return 0

    def flush(self) -> None:
        if not self.closed:
            try:
                self._stream.flush()
            except (ValueError, OSError):
                self.closed = True

    def close(self) -> None:
        self.flush()
        self.closed = True
        try:
            self._stream.close()
        except (ValueError, OSError):
            pass

    def _drop(self) -> None:
        self.dropped += 1
        if self.dropped == 1:
            log.info("trtls: a message after exit was dropped (stdout is closed)")


def report_server_error(error: Exception, source: ServerErrors) -> None:
    """One line on stderr; nothing on the wire (see the module doc). A failed request is already answered with
    its error and logged by pygls (one line, OneLineForClientErrors): nothing more."""
    from pygls.exceptions import FeatureRequestError

    if source is FeatureRequestError:
        return
    trace = "".join((getattr(error, "data", None) or {}).get("traceback") or [])
    if "/trtls/" in trace:  # a bug in one of our notification handlers: worth its traceback
        log.error("trtls: %s: %s: %s\n%s", getattr(source, "__name__", source), type(error).__name__, error, trace)
        return
    said = terminal_safe(error, keep_newlines=False)  # what the client sent, never raw control characters
    log.warning("trtls: %s ignored: %s: %s", getattr(source, "__name__", source), type(error).__name__, said)


def _ours(tb: TracebackType | None) -> bool:
    while tb is not None:
        if "/trtls/" in tb.tb_frame.f_code.co_filename.replace("\\", "/"):
            return True
        tb = tb.tb_next
    return False


class OneLineForClientErrors(logging.Filter):
    """On pygls' loggers: a record about an exception that is the client's doing (a JSON-RPC error such as invalid
    params, or any exception that never passed through trtls's code) loses its traceback and keeps one line, every
    control character in it (an escape sequence, a newline a hostile id carried) written visibly."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and record.exc_info[1] is not None:
            from pygls.exceptions import JsonRpcException

            exc = record.exc_info[1]
            cause = exc.__cause__ or exc.__context__
            # every JSON-RPC error is one line: a command's own failure was logged with its traceback where it
            # happened (lsp/server.py `command`), a notification handler's by report_server_error
            client_error = isinstance(exc, JsonRpcException)
            if client_error or not _ours(record.exc_info[2]) and not (cause is not None and _ours(cause.__traceback__)):
                # the message quotes what the client sent (an id, a name): one line, its control characters visible
                said = f"{record.getMessage()} ({type(exc).__name__}: {str(exc)[:300]})"
                record.msg = terminal_safe(said, keep_newlines=False)
                record.args = None
                record.exc_info = None
                record.exc_text = None
        return True


def install() -> None:
    """Route pygls' error logs through the rule above (TrtlsServer.report_server_error calls the other)."""
    one_line = OneLineForClientErrors()
    for handler in logging.getLogger().handlers:
        handler.addFilter(one_line)
    logging.raiseExceptions = False  # a log line to a closed stderr must not raise in turn
