"""A file object over a descriptor this process already holds: an inherited stdout, a pipe end, a `dup` of one.

Nothing is opened by name, so no path is judged; the door is still the one place a descriptor becomes a file object,
so the AST walk (tests/test_one_door.py) finds no `os.fdopen` elsewhere, and a descriptor that names a folder (a
mistake that would surface later as an odd write error) is refused here.
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
