"""Reading a recipe file: the one bounded reader every face uses (CLI, language server, farm, route, gc).

A recipe path comes from a user or a client, so the file is checked before it is read: only a regular file (a FIFO
would block the reader forever, `/dev/zero` never ends), opened non-blocking in case one replaced it since the
check, and at most MAX_RECIPE_BYTES read (a real recipe is ~20 KB; 2,000 engines ~200 KB; a 10 MB recipe took the
checker 37 s and 2 GB). Standard library only: the core model and the raw-TOML peeks before validation share it.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

MAX_RECIPE_BYTES = 256 * 1024


class NotARegularFile(OSError):
    """A FIFO, a device, a socket or a folder where a recipe file was named (TRT104)."""


class RecipeTooLarge(ValueError):
    """More than MAX_RECIPE_BYTES (TRT125); `size` is what was seen."""

    def __init__(self, size: int):
        super().__init__(
            f"recipe too large to check: {size:,} bytes (the limit is {MAX_RECIPE_BYTES:,}); split it, or move data "
            "out of it"
        )
        self.size = size


def file_kind(mode: int) -> str:
    kinds = (
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISDIR, "a folder"),
    )
    for test, name in kinds:
        if test(mode):
            return name
    return "not a regular file"


def read_recipe_bytes(path: str | os.PathLike[str]) -> bytes:
    """The file's bytes; raises NotARegularFile, RecipeTooLarge or OSError (missing, unreadable) — before it reads
    anything that could block or never end. Read through the door (`fs.read_bytes`: opened non-blocking, fstat'ed
    before a byte is read, bounded); a symlinked recipe is followed, as a user's input is."""
    from trtls.fs import TooLarge, UnsafeWrite, read_bytes

    st = os.stat(path)
    if not stat.S_ISREG(st.st_mode):
        raise NotARegularFile(
            errno.EINVAL, f"not a regular file ({file_kind(st.st_mode)}); recipes are files", str(path)
        )
    if st.st_size > MAX_RECIPE_BYTES:
        raise RecipeTooLarge(st.st_size)
    try:
        return read_bytes(path, limit=MAX_RECIPE_BYTES, follow=True)
    except TooLarge:
        raise RecipeTooLarge(max(os.stat(path).st_size, MAX_RECIPE_BYTES + 1)) from None
    except UnsafeWrite as exc:  # swapped for a FIFO, a device or a folder between the stat and the open
        if exc.errno in (errno.EINVAL, errno.EISDIR):
            kind = file_kind(os.stat(path).st_mode)
            raise NotARegularFile(errno.EINVAL, f"not a regular file ({kind}); recipes are files", str(path)) from None
        raise


def read_recipe_text(path: str | os.PathLike[str]) -> str:
    """`read_recipe_bytes` decoded as UTF-8 (UnicodeDecodeError, a ValueError, for anything else)."""
    return read_recipe_bytes(path).decode("utf-8")


def is_readable_recipe(path: Path) -> bool:
    """A regular file no larger than the bound (what a fast path may hash without risk)."""
    try:
        st = os.stat(path)
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and st.st_size <= MAX_RECIPE_BYTES
