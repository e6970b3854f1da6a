"""Single flight: one process builds a key, the others wait and reuse its engine.

`flock` on `<store>/locks/<key>.lock`: the kernel drops the lock when its holder exits however it exits (a
cancel, a failure, SIGKILL), so a waiter that then finds no entry knows the first build did not publish and
takes over. The holder writes its pid and build id into the file for the waiters' message."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path


class KeyLock:
    def __init__(self, store_root: Path, key: str):
        self.path = Path(store_root) / "locks" / f"{key}.lock"
        self._fd: int | None = None

    def try_acquire(self, holder: str) -> bool:
        """Take the lock without waiting; False when another process holds it."""
        if self._fd is not None:
            return True
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        except OSError:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()} {holder}\n".encode())
        self._fd = fd
        return True

    def relabel(self, holder: str) -> None:
        """Name the build that holds the lock once it exists (the supervisor chooses its id after the lock is
        taken), so a waiter's `waiting for build …` names a build whose evidence it can find."""
        if self._fd is None:
            return
        line = f"{os.getpid()} {holder}\n".encode()
        os.pwrite(self._fd, line, 0)
        os.ftruncate(self._fd, len(line))

    def holder(self) -> str:
        """`pid build-id` of the process that holds (or last held) the lock."""
        try:
            return self.path.read_text().strip()
        except OSError:
            return "?"

    def release(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def __enter__(self) -> KeyLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
