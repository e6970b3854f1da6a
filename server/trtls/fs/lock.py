"""Lock files: opened O_NOFOLLOW (a symlink planted at a lock's name is refused, never truncated or created
through), regular files with one name only (a hard link planted there is refused: its holder line would rewrite the
linked file), inside the folder the lock belongs to."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
from collections.abc import Iterator

from trtls.core.paths import UnsafeWrite
from trtls.fs.folder import _CLOEXEC, _NOFOLLOW, open_folder, own_file
from trtls.fs.kinds import Kind


def open_lock_file(
    path: str | os.PathLike[str], *, kind: Kind, within: str | os.PathLike[str], mode: int = 0o644
) -> int:
    """A read-write descriptor of the lock file (created when missing). The caller flocks and closes it."""
    from pathlib import Path

    target = Path(path)
    with open_folder(target.parent, within) as folder_fd:
        try:
            fd = os.open(
                target.name,
                os.O_RDWR | os.O_CREAT | _NOFOLLOW | _CLOEXEC | getattr(os, "O_NONBLOCK", 0),
                mode,
                dir_fd=folder_fd,
            )
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise UnsafeWrite(
                    errno.ELOOP, f"is a symlink; a {kind.label} is never opened through one", str(path)
                ) from None
            # the name was opened under its folder's descriptor: say the whole path (a located message)
            raise type(exc)(exc.errno, exc.strerror, str(path)) from None
    try:
        own_file(os.fstat(fd), path, kind.label)
    except UnsafeWrite:
        os.close(fd)
        raise
    os.set_blocking(fd, True)
    return fd


def try_lock(fd: int) -> bool:
    """An exclusive flock on a descriptor from `open_lock_file`, without waiting: False when another process holds
    it. The kernel drops it when the holder closes the descriptor or dies, SIGKILL included."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def unlock(fd: int) -> None:
    """Release a flock `try_lock` took (the descriptor stays open: the caller closes it)."""
    fcntl.flock(fd, fcntl.LOCK_UN)


def truncate_lock(fd: int, text: str) -> None:
    """Replace a held lock file's content (its holder line) in place (never when a hard link to it appeared since it
    was opened: the other name's file is not ours to rewrite)."""
    own_file(os.fstat(fd), f"<lock descriptor {fd}>", "lock file")
    data = text.encode("utf-8")
    os.pwrite(fd, data, 0)
    os.ftruncate(fd, len(data))


def remove_unheld_lock(path: str | os.PathLike[str], *, kind: Kind, within: str | os.PathLike[str]) -> bool:
    """Unlink the lock file `path` when no process holds it: opened under its folder's descriptor (O_NOFOLLOW, never
    created: a symlink there is left), flock'ed without waiting (held: left), and unlinked while held only when it is
    still the file at that name (st_dev, st_ino). A process that opened it before sees, once it has the lock, that
    the name leads elsewhere and opens it again (store/lock.py). False when held, gone, or not ours to open."""
    from pathlib import Path

    target = Path(path)
    if not kind.may_delete(target.name):
        raise UnsafeWrite(errno.EPERM, f"is not a name trtls makes for a {kind.label}; it is left alone", str(path))
    with open_folder(target.parent, within) as folder_fd:
        try:
            fd = os.open(target.name, os.O_RDONLY | _NOFOLLOW | _CLOEXEC | os.O_NONBLOCK, dir_fd=folder_fd)
        except OSError:
            return False  # gone, a symlink (ELOOP), another account's private file (EACCES): left
        try:
            opened = os.fstat(fd)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                return False  # a build holds it
            named = os.stat(target.name, dir_fd=folder_fd, follow_symlinks=False)
            if not stat.S_ISREG(opened.st_mode) or (named.st_dev, named.st_ino) != (opened.st_dev, opened.st_ino):
                return False
            os.unlink(target.name, dir_fd=folder_fd)
            return True
        finally:
            os.close(fd)  # the lock goes with the descriptor


@contextlib.contextmanager
def held_lock(path: str | os.PathLike[str], *, kind: Kind, within: str | os.PathLike[str]) -> Iterator[None]:
    """Hold an exclusive flock on the lock file `path` (created in its folder, which must exist, when missing) for
    the `with` block; waits for another holder. Released and closed on the way out, exception or not."""
    fd = open_lock_file(path, kind=kind, within=within)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
