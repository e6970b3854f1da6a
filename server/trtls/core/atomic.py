"""Atomic file writes: a reader sees the old file or the complete new one, never a half-written one.

The recipe is: write a temp file in the *same real folder* (so `os.replace` is a rename on one filesystem),
fsync it, `os.replace` it over the target, then fsync the folder so the rename itself survives a crash.
If anything fails before the rename, the temp file is removed and the old file is untouched. Nothing is written
through a symlink (`core.paths.checked_target`; the temp file is opened O_EXCL | O_NOFOLLOW).

Every artifact trtls promotes (bundles, sidecars, SBOMs, SARIF/JUnit reports, engines) goes through here.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

from trtls.core.paths import UnsafeWrite, checked_target

__all__ = ["UnsafeWrite", "atomic_write_bytes", "atomic_write_text", "atomic_writer", "fsync_dir", "temp_path_for"]

TEMP_MARK = ".trtls-tmp-"  # engine temp files carry this mark; orphan scans look for it


def temp_path_for(target: Path, tag: str) -> Path:
    """The temp file a build writes beside `target` before renaming it over (tag = build id)."""
    return target.with_name(f"{target.name}{TEMP_MARK}{tag}")


# mkstemp creates 0600 files; published artifacts should be readable like any file the user writes.
DEFAULT_MODE = 0o644


def fsync_dir(folder: str | os.PathLike[str]) -> None:
    """Flush a folder's entries (a rename is only durable once its folder is synced)."""
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return  # platforms that cannot open folders (Windows) have no folder fsync to do
    try:
        os.fsync(fd)
    except OSError:
        pass  # some filesystems refuse fsync on folders; the rename already happened
    finally:
        os.close(fd)


_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)


def _create_temp(folder_fd: int, name: str, temp_name: str | None, mode: int) -> tuple[int, str]:
    """A new temp file in the open folder: O_EXCL | O_NOFOLLOW, so nothing planted at its name (a file, a symlink to
    a file the user owns) is ever opened or truncated."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    if temp_name is not None:
        return os.open(temp_name, flags, mode, dir_fd=folder_fd), temp_name
    while True:
        candidate = f".{name}.{secrets.token_hex(4)}.tmp"
        try:
            return os.open(candidate, flags, mode, dir_fd=folder_fd), candidate
        except FileExistsError:
            continue


@contextlib.contextmanager
def atomic_writer(
    path: str | os.PathLike[str],
    *,
    mode: int = DEFAULT_MODE,
    within: str | os.PathLike[str] | None = None,
    temp_name: str | None = None,
) -> Iterator[BinaryIO]:
    """Yield a binary file that replaces `path` when the `with` block ends without an exception.

    On an exception the temp file is deleted and `path` keeps its previous content (or stays absent). Writes never
    follow a symlink: `path`'s real folder is opened once and the temp file is created and renamed inside that
    folder (by descriptor, so a folder swapped for a symlink meanwhile changes nothing); a final component that is a
    symlink, or a real folder outside `within`, raises `UnsafeWrite` before anything is created. `temp_name`: the
    temp file's name in that folder (an engine's `<output>.trtls-tmp-<build id>`, which orphan scans look for).
    """
    folder, name = checked_target(path, within)
    folder_fd = os.open(folder, os.O_RDONLY | _DIRECTORY | _NOFOLLOW)
    try:
        fd, tmp = _create_temp(folder_fd, name, temp_name, mode)
        try:
            with os.fdopen(fd, "wb") as out:
                os.fchmod(out.fileno(), mode)  # mode is masked by umask at creation; published files are 0644
                yield out
                out.flush()
                os.fsync(out.fileno())
            if os.path.islink(folder / name):  # planted while the file was written: refuse, do not replace the link
                raise UnsafeWrite(errno.ELOOP, "became a symlink while it was written", str(folder / name))
            os.replace(tmp, name, src_dir_fd=folder_fd, dst_dir_fd=folder_fd)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp, dir_fd=folder_fd)
            raise
        with contextlib.suppress(OSError):
            os.fsync(folder_fd)  # the rename is durable once its folder is synced (some filesystems refuse)
    finally:
        os.close(folder_fd)


def atomic_write_bytes(
    path: str | os.PathLike[str],
    data: bytes | bytearray | memoryview | Iterable[bytes],
    *,
    mode: int = DEFAULT_MODE,
    within: str | os.PathLike[str] | None = None,
    temp_name: str | None = None,
) -> None:
    """Write `data` (bytes, or an iterable of byte chunks for large content) to `path` atomically."""
    with atomic_writer(path, mode=mode, within=within, temp_name=temp_name) as out:
        if isinstance(data, (bytes, bytearray, memoryview)):
            out.write(data)
        else:
            for chunk in data:
                out.write(chunk)


def atomic_write_text(
    path: str | os.PathLike[str],
    text: str,
    *,
    encoding: str = "utf-8",
    mode: int = DEFAULT_MODE,
    within: str | os.PathLike[str] | None = None,
) -> None:
    """Write `text` to `path` atomically (no newline translation: what you pass is what lands)."""
    atomic_write_bytes(path, text.encode(encoding), mode=mode, within=within)
