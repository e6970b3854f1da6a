"""Copying a folder into a folder trtls made (the acceptance run's scratch copies of a recipe's folder).

The source is only read, each file through a descriptor opened without following a link (`fs.read.open_regular`);
a symlink in it is copied as a symlink (its text, never followed: what it points to is neither read nor written),
a FIFO, a socket or a device is skipped (reading a FIFO would hang, a device would never end). The copy is written
by the door's rules: every folder created by descriptor inside `within`, every file written atomically there, every
symlink created inside a folder opened by descriptor. A destination that already exists is refused, so a copy
never mixes with (or overwrites) what was there; so is one inside the source, which would copy its own copy again at
every level until the names are too long (hundreds of copies of every model, and a disk filled).
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
from collections.abc import Callable, Iterable
from pathlib import Path

from trtls.core.paths import UnsafeWrite, inside, real
from trtls.fs.folder import ensure_folder, open_folder
from trtls.fs.kinds import Kind
from trtls.fs.read import open_regular
from trtls.fs.write import atomic_writer

Ignore = Callable[[str, list[str]], Iterable[str]]  # shutil.copytree's: (folder, names) -> names to leave out


def copy_tree(
    source: str | os.PathLike[str],
    target: str | os.PathLike[str],
    *,
    within: str | os.PathLike[str],
    kind: Kind = Kind.scratch,
    ignore: Ignore | None = None,
) -> list[Path]:
    """Copy the folder `source` to `target` (which must not exist) inside `within`; file modes and times are kept.
    Returns the special files (FIFOs, sockets, devices) that were left out."""
    src, dst = Path(source), Path(target)
    if os.path.lexists(dst):
        raise UnsafeWrite(errno.EEXIST, "already exists; a copy is always made into a new folder", str(dst))
    if inside(real(dst), real(src)):
        raise UnsafeWrite(errno.EINVAL, f"is inside {src}, the folder it copies: never a copy into itself", str(dst))
    skipped: list[Path] = []
    _copy_folder(src, dst, Path(within), kind, ignore, skipped)
    return skipped


def _copy_folder(src: Path, dst: Path, within: Path, kind: Kind, ignore: Ignore | None, skipped: list[Path]) -> None:
    ensure_folder(dst, within=within)
    with os.scandir(src) as found:
        entries = sorted(found, key=lambda e: e.name)
    left_out = set(ignore(str(src), [e.name for e in entries])) if ignore is not None else set()
    for entry in entries:
        if entry.name in left_out:
            continue
        st = entry.stat(follow_symlinks=False)
        if stat.S_ISLNK(st.st_mode):
            with open_folder(dst, within) as folder_fd:
                os.symlink(os.readlink(entry.path), entry.name, dir_fd=folder_fd)
        elif stat.S_ISDIR(st.st_mode):
            _copy_folder(Path(entry.path), dst / entry.name, within, kind, ignore, skipped)
        elif stat.S_ISREG(st.st_mode):
            _copy_file(Path(entry.path), dst / entry.name, st, within, kind)
        else:
            skipped.append(Path(entry.path))


def _copy_file(src: Path, dst: Path, st: os.stat_result, within: Path, kind: Kind) -> None:
    with (
        open_regular(src, limit=None) as source,
        atomic_writer(dst, kind=kind, within=within, mode=stat.S_IMODE(st.st_mode)) as out,
    ):
        shutil.copyfileobj(source, out, 1 << 20)
        out.flush()
        os.utime(out.fileno(), ns=(st.st_atime_ns, st.st_mtime_ns))  # as shutil.copy2: a copy keeps its times
