"""Scratch space trtls makes for itself: a private folder (0700, marked OWNED_MARK) or file under the system temp
folder or a folder the caller names. Removing it later goes through `fs.remove_tree(kind=Kind.scratch)`.

A process killed before its `finally` ran (SIGKILL, the OOM killer, a reboot) cannot remove its scratch: a gate's
extracted artifact, a runtime call's inputs and outputs — a model's size each time. So a scratch folder's mark names
the process that made it (its pid, its start id, the host and pid namespace), and the first scratch folder a process
makes in the system temp folder sweeps the ones whose maker no longer runs (`sweep_abandoned`).
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
import tempfile
from pathlib import Path

from trtls.fs.kinds import OWNED_MARK, Kind

SWEPT_PREFIX = "trtls-"  # only trtls's own names in the system temp folder (`artifact-` and the like live inside one)
MARK_LIMIT = 512
_MARK = re.compile(r"scratch pid=(\d+) start=(\S+) host=(\S+) pidns=(\S+)\n")
_swept: set[str] = set()  # the temp folders this process has swept (once each)


def _where() -> str:
    """This host and pid namespace: a pid means one process only among the processes they hold."""
    try:
        pidns = os.readlink("/proc/self/ns/pid").replace(" ", "")
    except OSError:
        pidns = "-"
    return f"host={os.uname().nodename or '-'} pidns={pidns}"


def _maker() -> str:
    from trtls.fs.kill import process_start_id

    pid = os.getpid()
    return f"scratch pid={pid} start={process_start_id(pid) or '-'} {_where()}\n"


def scratch_dir(prefix: str = "trtls-", parent: str | os.PathLike[str] | None = None) -> Path:
    """A new private folder (mkdtemp: 0700, a fresh name) marked as trtls's, and as made by this process."""
    if parent is None:
        _sweep_once(tempfile.gettempdir())
    path = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    try:
        fd = os.open(path / OWNED_MARK, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
        try:
            os.write(fd, _maker().encode())
        finally:
            os.close(fd)
    except OSError:  # a full disk: no half-made folder is left behind (the folder is new and ours: nothing else in it)
        with contextlib.suppress(OSError):
            os.unlink(path / OWNED_MARK)
        with contextlib.suppress(OSError):
            os.rmdir(path)
        raise
    return path


def scratch_file(suffix: str = "", prefix: str = "trtls-", parent: str | os.PathLike[str] | None = None) -> Path:
    """A new private empty file (mkstemp: 0600, O_EXCL)."""
    fd, name = tempfile.mkstemp(suffix=suffix, prefix=prefix, dir=parent)
    os.close(fd)
    return Path(name)


def _sweep_once(parent: str) -> None:
    if parent not in _swept:
        _swept.add(parent)
        with contextlib.suppress(OSError):  # a sweep that cannot look is no reason to fail the work that asked
            sweep_abandoned(parent)


def _abandoned(folder_fd: int, here: str) -> bool:
    """Whether the open folder's mark names a process of this host and pid namespace (`here`, `_where()`) that no
    longer runs. A folder without a mark, a mark that is not a regular file, an older mark that names no process, or
    one /proc cannot judge: kept."""
    from trtls.fs.kill import process_start_id

    try:
        fd = os.open(OWNED_MARK, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | os.O_NONBLOCK, dir_fd=folder_fd)
    except OSError:
        return False
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        found = _MARK.fullmatch(os.read(fd, MARK_LIMIT).decode("utf-8", "replace"))
    finally:
        os.close(fd)
    if found is None or found[2] == "-" or f"host={found[3]} pidns={found[4]}" != here:
        return False  # another host's or container's (a shared /tmp): its processes cannot be seen from here
    now = process_start_id(int(found[1]))
    # None: that pid runs nothing (the sweep runs only where /proc answers for this process); else another process
    # runs under it now when the start id differs (or the boot changed)
    return now is None or now != found[2]


def sweep_abandoned(parent: str | os.PathLike[str]) -> list[Path]:
    """Remove the scratch folders in `parent` whose maker no longer runs; returns those removed. Only a folder named
    `trtls-…`, not a link, this account's, holding its mark (a regular file) that names a process of this host and
    pid namespace gone for good — its pid runs nothing, or another process (the start id differs). Removed through
    the door (`remove_tree`: by descriptor, a link inside unlinked, never followed)."""
    from trtls.fs.kill import process_start_id
    from trtls.fs.remove import remove_tree

    removed: list[Path] = []
    uid, here = os.geteuid(), _where()
    if here.endswith("pidns=-") or process_start_id(os.getpid()) is None:
        return removed  # /proc cannot tell who runs here: no folder can be judged abandoned
    with os.scandir(parent) as entries:
        candidates = [e.name for e in entries if e.name.startswith(SWEPT_PREFIX)]
    for name in candidates:
        path = Path(parent) / name
        try:
            fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_NOFOLLOW", 0))
        except OSError:  # gone, a link, not a folder, not ours to open
            continue
        try:
            if os.fstat(fd).st_uid != uid or not _abandoned(fd, here):
                continue
        finally:
            os.close(fd)
        with contextlib.suppress(OSError):
            if remove_tree(path, kind=Kind.scratch, within=parent):
                removed.append(path)
    return removed
