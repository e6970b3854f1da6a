"""Atomic file writes: a reader sees the old file or the complete new one, never a half-written one.

The recipe is: write a temp file in the *same folder* (so `os.replace` is a rename on one filesystem),
fsync it, `os.replace` it over the target, then fsync the folder so the rename itself survives a crash.
If anything fails before the rename, the temp file is removed and the old file is untouched.

Every artifact trtls promotes (bundles, sidecars, SBOMs, SARIF/JUnit reports, engines) goes through here.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

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


@contextlib.contextmanager
def atomic_writer(path: str | os.PathLike[str], *, mode: int = DEFAULT_MODE) -> Iterator[BinaryIO]:
    """Yield a binary file that replaces `path` when the `with` block ends without an exception.

    On an exception the temp file is deleted and `path` keeps its previous content (or stays absent).
    """
    target = Path(path)
    folder = target.parent if str(target.parent) else Path(".")
    fd, tmp_name = tempfile.mkstemp(dir=folder, prefix=f".{target.name}.", suffix=".tmp")
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as out:
            yield out
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise
    fsync_dir(folder)


def atomic_write_bytes(
    path: str | os.PathLike[str], data: bytes | bytearray | memoryview | Iterable[bytes], *, mode: int = DEFAULT_MODE
) -> None:
    """Write `data` (bytes, or an iterable of byte chunks for large content) to `path` atomically."""
    with atomic_writer(path, mode=mode) as out:
        if isinstance(data, (bytes, bytearray, memoryview)):
            out.write(data)
        else:
            for chunk in data:
                out.write(chunk)


def atomic_write_text(
    path: str | os.PathLike[str], text: str, *, encoding: str = "utf-8", mode: int = DEFAULT_MODE
) -> None:
    """Write `text` to `path` atomically (no newline translation: what you pass is what lands)."""
    atomic_write_bytes(path, text.encode(encoding), mode=mode)
