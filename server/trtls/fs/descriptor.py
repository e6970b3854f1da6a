"""A file object over a descriptor this process already holds: an inherited stdout, a pipe end, a `dup` of one.

Nothing is opened by name, so no path is judged; the door is still the one place a descriptor becomes a file object,
so the AST walk (tests/test_one_door.py) finds no `os.fdopen` elsewhere, and a descriptor that names a folder (a
mistake that would surface later as an odd write error) is refused here. And a descriptor whose reader went away
is pointed at /dev/null here (`discard_writes`).
"""

from __future__ import annotations

import errno
import os
import stat
from typing import IO, Any

from trtls.core.paths import UnsafeWrite


def file_of(fd: int, mode: str = "w", *, buffering: int = -1) -> IO[Any]:
    """`os.fdopen(fd, mode, buffering)` for a descriptor we hold; the file object owns it from now on."""
    if stat.S_ISDIR(os.fstat(fd).st_mode):
        raise UnsafeWrite(errno.EISDIR, "is a folder, not a stream", f"<descriptor {fd}>")
    return os.fdopen(fd, mode, buffering=buffering)


def discard_writes(fd: int) -> None:
    """From now on, what is written to `fd` (our stdout or stderr) goes nowhere: its reader went away (`trtls … | head`
    ended). /dev/null takes the descriptor's place, so a later write or the interpreter's last flush cannot fail."""
    null = os.open(os.devnull, os.O_WRONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        os.dup2(null, fd)
    finally:
        os.close(null)
