"""The one place the command line prints: stdout and stderr escape every control character (issue 27, item 13).

A name from a recipe, a model, a record or TensorRT's log (an engine name, an output path, an unknown key, an ONNX
node name, a route's `intended_use`, a build id) can carry escape sequences that clear the screen, print a fake
success line, set the window title or write the clipboard (OSC 52). Escaping at each call site forgets one; so
`trtls.cli.main` runs every command with `sys.stdout` and `sys.stderr` lent to `SafeStream`, which writes every
text through `core.terminal_text.terminal_safe`: argparse's errors (they echo argv), our messages, a library's
prints, a traceback. JSON output is escaped by the JSON encoder before it gets here (`ensure_ascii`), so the stream
changes nothing in it. The live rich views draw their own escape sequences: they write to `raw(sys.stdout)` and
escape each name themselves (`terminal_view`, `matrix_view`).
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterable, Iterator
from typing import Any, TextIO

from trtls.core.terminal_text import terminal_safe


class SafeStream:
    """A text stream whose writes are escaped for a terminal; everything else is the wrapped stream's."""

    def __init__(self, inner: TextIO) -> None:
        self.inner = inner
        self.lost: str | None = None  # why some output could not be written (a full disk, an I/O error)

    def write(self, text: str) -> int:
        try:
            self.inner.write(terminal_safe(text))
        except BrokenPipeError:
            self._reader_gone()
        except OSError as exc:
            self._lost(exc)
        return len(text)

    def flush(self) -> None:
        try:
            self.inner.flush()
        except BrokenPipeError:
            self._reader_gone()
        except OSError as exc:
            self._lost(exc)

    def _lost(self, exc: OSError) -> None:
        """The output could not be written (`trtls … > file` on a full disk: ENOSPC, an I/O error): never a traceback;
        the rest is discarded and `exit_code` turns the command's 0 into 1, for its reader got a cut-off answer."""
        self.lost = self.lost or exc.strerror or str(exc)
        self._reader_gone()

    def _reader_gone(self) -> None:
        """The pipe's reader ended (`trtls build … | head -1`): nothing more can be shown, and that is no reason to
        stop a command midway or end it with a traceback. Its writes go to /dev/null from now on; the command goes on
        (a build finishes and writes its evidence) and exits with its own code."""
        from trtls.fs.descriptor import discard_writes

        with contextlib.suppress(OSError, ValueError):
            discard_writes(self.inner.fileno())

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:  # flush, isatty, fileno, encoding, buffer, ...
        return getattr(self.inner, name)


def raw(stream: Any) -> Any:
    """The stream under a SafeStream (for a view that writes its own escape sequences and escapes names itself)."""
    return stream.inner if isinstance(stream, SafeStream) else stream


def exit_code(out: SafeStream, command: str, code: int) -> int:
    """The command's exit code, or 1 for a 0 when some of what it printed on stdout could not be written (said on
    stderr, where that still can be)."""
    if out.lost is None:
        return code
    with contextlib.suppress(OSError, ValueError):
        print(f"trtls {command}: its output could not all be written ({out.lost})", file=sys.stderr)
    return code or 1


@contextlib.contextmanager
def safe_console() -> Iterator[SafeStream]:
    """stdout and stderr escaped for the block (restored after it, so an in-process caller gets its own back); it
    gives the stdout stream, whose `lost` says after the block whether all of it was written."""
    out, err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = safe_out, safe_err = SafeStream(raw(out)), SafeStream(raw(err))
    try:
        yield safe_out
    finally:
        safe_out.flush()  # what is still buffered, while a reader that went away is still a quiet end
        safe_err.flush()
        sys.stdout, sys.stderr = out, err
