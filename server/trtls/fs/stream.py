"""A file written as it goes (a build's `events.jsonl`): not atomic — a next process must find what was written
before a crash — but opened by the door's rules: inside the folder it must stay in (judged, then opened by
descriptor without following a link), never through a final symlink, regular files with one name only (emptied
only once it proved to be one: a hard link planted at its name is refused, its file untouched)."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import BinaryIO

from trtls.core.paths import UnsafeWrite
from trtls.fs.folder import _CLOEXEC, _NOFOLLOW, open_folder, own_file
from trtls.fs.kinds import Kind
from trtls.fs.write import DEFAULT_MODE


def open_stream(
    path: str | os.PathLike[str],
    *,
    kind: Kind,
    within: str | os.PathLike[str],
    truncate: bool = True,
    mode: int = DEFAULT_MODE,
) -> BinaryIO:
    """An unbuffered binary file at `path`, created when missing (`truncate`: emptied when it exists, else appended
    to). The caller closes it. UnsafeWrite when its folder leads out of `within`, or it is a symlink or not a file."""
    target = Path(path)
    if target.name in ("", ".", ".."):
        raise UnsafeWrite(errno.EISDIR, "not a file name", str(target))
    flags = os.O_WRONLY | os.O_CREAT | _NOFOLLOW | _CLOEXEC | getattr(os, "O_NONBLOCK", 0)
    flags |= 0 if truncate else os.O_APPEND  # emptied below, once it proved to be its own file (O_TRUNC is at once)
    with open_folder(target.parent, within) as folder_fd:
        try:
            fd = os.open(target.name, flags, mode, dir_fd=folder_fd)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise UnsafeWrite(
                    errno.ELOOP, f"is a symlink; a {kind.label} is never written through one", str(path)
                ) from None
            raise
    try:
        own_file(os.fstat(fd), path, kind.label)
        if truncate:
            os.ftruncate(fd, 0)
        os.set_blocking(fd, True)
        return os.fdopen(fd, "wb", buffering=0)
    except BaseException:
        os.close(fd)
        raise
