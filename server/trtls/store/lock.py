"""Single flight: one process builds a key, the others wait and reuse its engine.

`flock` on `<store>/locks/<key>.lock`: the kernel drops the lock when its holder exits however it exits (a
cancel, a failure, SIGKILL), so a waiter that then finds no entry knows the first build did not publish and
takes over. The holder writes its pid and build id into the file for the waiters' message.

Lock files do not pile up: an evicted entry's is removed, and `trtls store gc` removes every one no build holds
(`clean_locks`), each locked first and unlinked only while it is still the file at its name (`fs.remove_unheld_lock`).
A build that opened a lock file just before a sweep removed it sees, once it holds the lock, that the file has no name
any more (`_still_named`) and locks the one at the name now: never two holders of one key.

The lock file is opened through the door (`fs.open_lock_file`: O_NOFOLLOW, a regular file, inside the store): a
symlink planted at its name is never truncated or created through — it is removed (the link itself) and the lock
file made in its place. A lock file another account made (not writable by us) is still locked, through a read-only
descriptor (`flock` needs none): the key is built, and only the holder line is not written. One this account can
neither write nor read (another account's, mode 0600: made under umask 077 before trtls applied the store's mode) cannot
be locked at all, and is not removed (its owner may hold it now): the build goes on without single flight, and `note`
says so, naming the file and its owner (a TRT331 warning in the build's evidence). In a store this account
cannot write at all (no lock file there, none can be made: `StoreFolder.unwritable`) no lock is taken: this process
publishes nothing, so there is nothing for single flight to guard, and the build goes on."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from pathlib import Path

from trtls import fs
from trtls.core.paths import UnsafeWrite
from trtls.fs import Kind, read_text
from trtls.fs.lock import truncate_lock, try_lock, unlock
from trtls.fs.store_root import fit_mode, shared_modes
from trtls.store.folder import owner_of
from trtls.store.key import is_key

HOLDER_LIMIT = 4096


class KeyLock:
    def __init__(self, store_root: Path, key: str):
        if not is_key(key):
            raise ValueError(f"not an engine key: {key[:80]!r}")
        self.root = Path(store_root)
        self.path = self.root / "locks" / f"{key}.lock"
        self._fd: int | None = None
        self._writable = False
        self.note: str | None = None  # why the key could not be locked though the store is writable (TRT331)

    def _open(self) -> int | None:
        """A descriptor of the lock file, or None when there is none and none can be made here."""
        try:
            fs.ensure_folder(self.path.parent, within=self.root)
            fd = fs.open_lock_file(self.path, kind=Kind.store_lock, within=self.root)
            self._writable = True
            _, file_mode = shared_modes(self.root)
            if file_mode != 0o644:  # a team's store: another account locks this file too (umask took g+w away)
                fit_mode(self.path, file_mode, self.root)
            return fd
        except PermissionError:
            pass  # another account's lock file: lock it read-only
        except UnsafeWrite as exc:
            if exc.errno not in (errno.ELOOP, errno.EINVAL):
                raise
            # a link (or a FIFO) planted at the lock's name: the name is removed, what a link names is never touched
            try:
                fs.remove_file(self.path, kind=Kind.store_lock, within=self.root)
            except OSError as gone:
                if gone.errno not in (errno.EROFS, errno.EACCES, errno.EPERM):
                    raise
                return None  # a read-only store with a planted name: no lock, and nothing is published here
            fd = fs.open_lock_file(self.path, kind=Kind.store_lock, within=self.root)
            self._writable = True
            return fd
        except OSError as exc:
            if exc.errno != errno.EROFS:
                raise
        try:
            with fs.open_regular(self.path, limit=None, follow=False) as fh:
                self._writable = False
                return os.dup(fh.fileno())
        except FileNotFoundError:
            return None  # no lock file, and this account cannot make one: the store is not written by us
        except PermissionError:
            self.note = (
                f"TRT331 the lock file {self.path}{owner_of(self.path)} can be neither written nor read by this"
                " account: this build of the key is not single-flight with the other accounts' (its owner can"
                " `chmod g+rw` it)"
            )
            return None

    def try_acquire(self, holder: str, again: int = 3) -> bool:
        """Take the lock without waiting; False when another process holds it. `again`: how often a file a sweep removed
        between our open and our lock is followed to the one at the name (then it is kept as taken: on a file system
        whose names and descriptors never agree, a build locks as before sweeps existed and never waits forever)."""
        if self._fd is not None:
            return True
        fd = self._open()
        if fd is None:
            return True  # nothing to hold: this process cannot publish here, or cannot lock the key (`note`): it builds
        try:
            taken = try_lock(fd)
        except OSError:
            os.close(fd)
            raise
        if not taken:
            os.close(fd)
            return False
        if again > 0 and not _still_named(fd, self.path):  # swept (`store gc`, an eviction) since our open
            os.close(fd)
            return self.try_acquire(holder, again - 1)  # the name holds a new file now (or none): that one is the lock
        self._fd = fd
        self.relabel(holder)
        return True

    def relabel(self, holder: str) -> None:
        """Name the build that holds the lock once it exists (the supervisor chooses its id after the lock is
        taken), so a waiter's `waiting for build …` names a build whose evidence it can find."""
        if self._fd is None or not self._writable:
            return
        with contextlib.suppress(OSError):
            truncate_lock(self._fd, f"{os.getpid()} {holder}\n")

    def holder(self) -> str:
        """`pid build-id` of the process that holds (or last held) the lock."""
        try:
            return read_text(self.path, limit=HOLDER_LIMIT, follow=False, errors="replace").strip() or "?"
        except OSError:
            return "?"

    def release(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            unlock(fd)
            os.close(fd)

    def __enter__(self) -> KeyLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _still_named(fd: int, path: Path) -> bool:
    """Whether the locked descriptor is still the file at `path` (st_dev, st_ino): a sweep unlinks a lock file only
    while it holds it (`fs.remove_unheld_lock`), so a file locked after that has no name any other process can open."""
    try:
        named, held = os.lstat(path), os.fstat(fd)
    except OSError:
        return False
    return (named.st_dev, named.st_ino) == (held.st_dev, held.st_ino)


def clean_locks(root: Path) -> int:
    """Remove the lock files in `<root>/locks` that no build holds (`trtls store gc`): only names trtls makes there,
    each through the door (`fs.remove_unheld_lock`: locked first, unlinked only while it is still the file at its
    name, never through a symlink). A lock file this account cannot open (another account's, mode 0600) is left.
    How many were removed."""
    folder = root / "locks"
    try:
        names = os.listdir(folder) if stat.S_ISDIR(os.lstat(folder).st_mode) else []
    except OSError:
        return 0
    removed = 0
    for name in names:
        if Kind.store_lock.may_delete(name):
            with contextlib.suppress(OSError):
                removed += fs.remove_unheld_lock(folder / name, kind=Kind.store_lock, within=root)
    return removed
