"""Reading a recipe file: the one bounded reader every face uses (CLI, language server, farm, route, gc).

A recipe path comes from a user or a client, so the file is checked before it is read: only a regular file (a FIFO
would block the reader forever, `/dev/zero` never ends), opened non-blocking in case one replaced it since the
check, and at most MAX_RECIPE_BYTES read (a real recipe is ~20 KB; 2,000 engines ~200 KB; a 10 MB recipe took the
checker 37 s and 2 GB). Standard library only: the core model and the raw-TOML peeks before validation share it.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from pathlib import Path
from typing import Any

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


def read_recipe_bytes(path: str | os.PathLike[str], st: os.stat_result | None = None) -> bytes:
    """The file's bytes; raises NotARegularFile, RecipeTooLarge or OSError (missing, unreadable) — before it reads
    anything that could block or never end. Read through the door (`fs.read_bytes`: opened non-blocking, fstat'ed
    before a byte is read, bounded); a symlinked recipe is followed, as a user's input is. `st`: the path's stat the
    caller just took (`recipe_snapshot`), judged here as this one's own would be."""
    from trtls.fs import TooLarge, UnsafeWrite, read_bytes

    st = os.stat(path) if st is None else st
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


def is_readable_recipe(path: Path) -> bool:
    """A regular file no larger than the bound (what a fast path may hash without risk)."""
    try:
        st = os.stat(path)
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and st.st_size <= MAX_RECIPE_BYTES


class Snapshot:
    """One version of a recipe file as this process read it once: its bytes, their sha256 and its raw TOML data (each
    worked out on first use). The data is for decisions made before the recipe models load — whether a worker starts
    early, whether the store may serve, the engine's view — never a checked recipe: treat it as read-only."""

    __slots__ = ("raw", "_sha256", "_data")

    def __init__(self, raw: bytes) -> None:
        self.raw = raw
        self._sha256: str | None = None
        self._data: dict[str, Any] | None = None

    @property
    def sha256(self) -> str:
        if self._sha256 is None:
            self._sha256 = hashlib.sha256(self.raw).hexdigest()
        return self._sha256

    @property
    def data(self) -> dict[str, Any]:
        """Raises ValueError (not UTF-8, not TOML, nested past the bound: TRT120 once the recipe is checked)."""
        if self._data is None:
            from trtls.core.toml_bounded import bounded_loads

            self._data = bounded_loads(self.raw.decode("utf-8"))
        return self._data


_SNAPSHOTS: dict[tuple[int, int], tuple[tuple[int, int, int], Snapshot]] = {}  # (dev, inode) → (version, snapshot)
_MAX_SNAPSHOTS = 16


def remember_snapshots(on: bool) -> None:
    """On for the life of one command (cli/entry.main: a build asks its recipe the same questions up to six times in
    its first ~0.3 s), off after it. Never on in the language server: its life outlasts edits that a file clock with a
    few milliseconds' resolution may not tell apart (two saves of the same size within one tick)."""
    global _remembering
    _SNAPSHOTS.clear()
    _remembering = on


_remembering = False


def recipe_snapshot(path: str | os.PathLike[str]) -> Snapshot:
    """The recipe file's current version (`read_recipe_bytes`, so its errors). While a command remembers snapshots
    (`remember_snapshots`), read once however many times it is asked for while it does not change: a build's fast
    path asked for its raw TOML three times and hashed it twice, its check and its evidence's retention read it again
    (issue 31). A version is the file's size, mtime and ctime — an edit changes them (ctime cannot be set back)."""
    if not _remembering:
        return Snapshot(read_recipe_bytes(path))
    st = os.stat(path)
    key, version = (st.st_dev, st.st_ino), (st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    seen = _SNAPSHOTS.get(key)
    if seen is not None and seen[0] == version:
        return seen[1]
    snapshot = Snapshot(read_recipe_bytes(path, st))
    if len(_SNAPSHOTS) >= _MAX_SNAPSHOTS:
        _SNAPSHOTS.pop(next(iter(_SNAPSHOTS)))
    _SNAPSHOTS[key] = (version, snapshot)
    return snapshot
