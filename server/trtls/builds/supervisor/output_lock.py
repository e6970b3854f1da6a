"""One writer per output: an advisory lock per engine output path, held by the process that supervises the build.

Two builds of one output (two terminals, a terminal and the editor, two farm cells) would otherwise race: both
rename a complete engine over the same path, and each one's evidence records the sha it wrote, not what is on disk
when it ends. The lock is an `fcntl.flock` on `.trtls/locks/<hash of the output path>.lock` — never a file beside
the user's engine — opened with `O_NOFOLLOW`, so a symlink planted where a lock goes is refused, not followed. The
kernel releases a flock when its holder dies (SIGKILL included), so a dead build never keeps an output locked.
An output outside the recipe folder (`allow_outside`) can be another project's output too (two checkouts of one
repository deploying to `/srv/engines`): its lock is in the per-user cache folder (`~/.cache/trtls/locks/`), the one
place every project agrees on — each project locking in its own `.trtls` let one's restore remove the other's
half-written engine as a stale temp (the other then said "No such file or directory" and rebuilt). Where that folder
cannot be used (no writable home), the project's own lock is taken, as before.

The holder writes who it is into the lock file (build id, pid, owner) so a second build can say what it waits for.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trtls.builds.roots import state_root
from trtls.fs import Kind, ensure_folder, open_lock_file, parse_json, read_bytes
from trtls.fs.lock import truncate_lock, try_lock

MAX_HOLDER_BYTES = 64 << 10  # a holder line is a few hundred bytes
POLL_S = 0.1  # a waiting build retries this often (a cancel while waiting is seen at once: it is not a blocking call)


class OutputLockError(OSError):
    """The lock file cannot be opened (a symlink where it should be, an unwritable .trtls folder)."""


def output_key(output: Path) -> str:
    """The path every writer of this output agrees on: its real parent folder (so `build/` and a symlink to it
    are one output) and its own name, not followed (the path policy refuses a symlinked output itself)."""
    parent = os.path.realpath(output.parent)
    return os.path.join(parent, output.name)


def lock_path(locks_dir: Path, output: Path) -> Path:
    return locks_dir / f"{hashlib.sha256(output_key(output).encode()).hexdigest()[:32]}.lock"


def shared_lock_path(project_lock: Path, output: Path) -> Path | None:
    """Where every project locks `output` when it lies outside the recipe folder of `project_lock`
    (`<recipe>/.trtls/locks/<hash>.lock`): the per-user cache folder's `locks/`, same name. None for an output inside
    the recipe folder (only this project writes it) or a lock that is not in a `.trtls/locks` folder."""
    from trtls.core.paths import inside, real, user_cache_dir

    locks = project_lock.parent
    if locks.name != "locks" or locks.parent.name != ".trtls":
        return None
    if inside(Path(output_key(output)), real(locks.parent.parent)):
        return None
    return user_cache_dir() / "locks" / project_lock.name


@dataclass
class OutputLock:
    """A held (or not yet held) lock on one output. `holder()` reads who holds it when `try_acquire` fails."""

    path: Path
    output: Path
    fd: int | None = None
    waited_for: list[dict[str, Any]] = field(default_factory=list)
    acquired_at: float | None = None
    project: Path | None = None  # the project's own lock when `path` is the shared one (used where that cannot be)

    def __post_init__(self) -> None:
        shared = shared_lock_path(self.path, self.output)
        if shared is not None:
            self.project, self.path = self.path, shared

    def _open(self) -> int:
        if self.project is not None:
            cache = self.path.parent.parent.parent  # `~/.cache` (or $XDG_CACHE_HOME), made inside an existing home only
            root = next((f for f in (cache, cache.parent) if f.is_dir()), None)
            try:
                if root is None:
                    raise FileNotFoundError(cache)
                return self._open_at(self.path, root)
            except OSError:  # no usable per-user cache folder: the project's lock, as every build took before
                self.path, self.project = self.project, None
        return self._open_at(self.path, state_root(self.path))  # the recipe's folder: a swapped `.trtls` is refused

    @staticmethod
    def _open_at(path: Path, root: Path) -> int:
        try:
            ensure_folder(path.parent, within=root)
            return open_lock_file(path, kind=Kind.evidence, within=root)
        except OSError as exc:
            why = "it is a symlink" if exc.errno == errno.ELOOP else (exc.strerror or str(exc))
            raise OutputLockError(exc.errno, f"cannot open the output lock {path}: {why}") from None

    def try_acquire(self, holder: dict[str, Any]) -> bool:
        """Take the lock without waiting; on success write `holder` into the lock file."""
        if self.fd is not None:
            return True
        fd = self._open()
        if not try_lock(fd):
            os.close(fd)
            return False
        self.fd = fd
        self.acquired_at = time.time()
        record = json.dumps({**holder, "output": str(self.output), "acquiredAt": round(self.acquired_at, 3)})
        with contextlib.suppress(OSError):
            truncate_lock(fd, record)
        return True

    def holder(self) -> dict[str, Any]:
        """Who holds the lock, as it wrote itself down ({} when it has not yet, or the file cannot be read: a
        symlink, not a file, larger than a holder line)."""
        try:
            data = parse_json(read_bytes(self.path, limit=MAX_HOLDER_BYTES) or b"{}")
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def release(self) -> None:
        """Release the lock. The lock file stays (removing it would let a third build lock a new file while a
        second still waits on the old one)."""
        if self.fd is None:
            return
        with contextlib.suppress(OSError):
            truncate_lock(self.fd, "")
        os.close(self.fd)  # closing the only descriptor releases the flock
        self.fd = None

    @property
    def held(self) -> bool:
        return self.fd is not None


async def acquire(
    lock: OutputLock,
    holder: dict[str, Any],
    *,
    wait: bool,
    on_wait: Callable[[dict[str, Any]], None],
    stop: Callable[[], bool],
) -> bool:
    """Take `lock`, waiting for the current holder when `wait` (calling `on_wait(holder)` each time the holder
    changes) until it is free or `stop()` says the build was cancelled. False when not taken."""
    seen: str | None = None
    while not lock.try_acquire(holder):
        current = lock.holder()
        ident = str(current.get("buildId"))
        if ident != seen:
            seen = ident
            lock.waited_for.append(current)
            on_wait(current)
        if not wait or stop():
            return False
        import asyncio  # here: a restore from the store takes this lock without a loop (no asyncio import)

        await asyncio.sleep(POLL_S)
    return True


def describe_holder(holder: dict[str, Any]) -> str:
    """`build demo-2026… (trtls build, pid 123)` — for the waiting line and the refusal message."""
    if not holder.get("buildId"):
        return "another build (it has not said which yet)"
    owner = holder.get("owner") or {}
    who = ", ".join(str(x) for x in (owner.get("kind"), f"pid {holder.get('pid')}" if holder.get("pid") else None) if x)
    return f"build {holder['buildId']}" + (f" ({who})" if who else "")
