"""Files that are not replaced atomically because something writes into them while they are open: a child
process's stdout/stderr captured into its scratch folder, and an anonymous spool a writer stages a stream of unknown
length in before it knows the length.

Both are created inside the folder they must stay in, opened by descriptor from `within` (`fs.folder.open_folder`),
never through a symlink and never over an existing name (O_EXCL): nothing that was there is truncated.
"""

from __future__ import annotations

import contextlib
import errno
import os
from pathlib import Path
from typing import BinaryIO

from trtls.core.paths import UnsafeWrite
from trtls.fs.folder import _CLOEXEC, _NOFOLLOW, open_folder
from trtls.fs.kinds import Kind


def new_file(
    path: str | os.PathLike[str], *, kind: Kind, within: str | os.PathLike[str], mode: int = 0o600
) -> BinaryIO:
    """A new, empty file at `path` opened for writing (the caller closes it; a child process may hold a copy of its
    descriptor). Refused when anything, a symlink included, already has that name."""
    target = Path(path)
    if target.name in ("", ".", ".."):
        raise UnsafeWrite(errno.EISDIR, "not a file name", str(path))
    with open_folder(target.parent, within) as folder_fd:
        try:
            fd = os.open(
                target.name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, mode, dir_fd=folder_fd
            )
        except FileExistsError:
            raise UnsafeWrite(errno.EEXIST, f"already exists; a {kind.label} is always a new file", str(path)) from None
    return os.fdopen(fd, "wb")


def spool_file(folder: str | os.PathLike[str], *, within: str | os.PathLike[str]) -> BinaryIO:
    """An anonymous read-write file in `folder` (same filesystem as what is written there next): O_TMPFILE where the
    system has it, else a fresh name unlinked at once. Gone when closed; no name is ever left behind."""
    with open_folder(folder, within) as folder_fd:
        tmpfile = getattr(os, "O_TMPFILE", 0)
        if tmpfile:
            with contextlib.suppress(OSError):
                return os.fdopen(os.open(".", os.O_RDWR | tmpfile | _CLOEXEC, 0o600, dir_fd=folder_fd), "w+b")
        import secrets

        while True:
            name = f".trtls-spool-{secrets.token_hex(8)}.tmp"
            try:
                fd = os.open(name, os.O_RDWR | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, 0o600, dir_fd=folder_fd)
            except FileExistsError:
                continue
            os.unlink(name, dir_fd=folder_fd)
            return os.fdopen(fd, "w+b")
