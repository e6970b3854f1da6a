"""Copying an engine into or out of the store while hashing what was copied, and the two test hooks that stop or
fail a copy half-way (a test SIGKILLs us there, or sees a full disk).

A reflink (FICLONE, copy-on-write) is tried first where the file system can; the clone is then read back and hashed
(the verification is of the bytes the destination holds, not of the source). A read of the source that fails is an
`EntryUnreadable` (the entry is damaged), told apart from a write that fails (the destination's problem).

A copy of a large engine hashes each block on a second thread while the block is written (`_BlockHasher`): hashlib
and the write both release the GIL, so the hash runs beside the write instead of before it (`large`'s 131.5 MiB engine
with its fsync: 197 → 173 ms here; what is left is the write and the disk: docs/performance.md, "The store's copy,
hash beside write")."""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import queue
import threading
import time
from pathlib import Path
from typing import BinaryIO

from trtls import fs
from trtls.fs import Kind

FICLONE = 0x40049409  # linux/fs.h
BLOCK = 1 << 20
HASH_BESIDE_FROM = 8 * BLOCK  # below it the second thread's start and handovers cost more than the hash it hides
HASH_AHEAD = 4  # blocks written but not yet hashed, at most: the copy's memory stays bounded (4 MiB)


class EntryUnreadable(OSError):
    """The store side of a copy failed: the entry's engine could not be read (EIO, a vanished file)."""


def _pause(point: str, fraction_written: bool) -> None:
    """Test hook: with TRTLS_STORE_PAUSE=<point>, stop half-way through writing (marker file
    TRTLS_STORE_PAUSE_FILE created) until the marker is removed, so a test can SIGKILL us at that exact moment."""
    if os.environ.get("TRTLS_STORE_PAUSE") != point or not fraction_written:
        return
    marker = Path(os.environ["TRTLS_STORE_PAUSE_FILE"])
    fs.atomic_write_text(marker, str(os.getpid()), kind=Kind.scratch, within=marker.parent)
    while marker.exists():
        time.sleep(0.01)


def _fault(point: str) -> None:
    """Test hook: TRTLS_STORE_FAULT=enospc makes a publish's write fail as a full disk would (ENOSPC)."""
    if os.environ.get("TRTLS_STORE_FAULT") == "enospc" and point == "publish":
        raise OSError(errno.ENOSPC, "No space left on device (TRTLS_STORE_FAULT)")


def _read(src: BinaryIO) -> bytes:
    try:
        return src.read(BLOCK)
    except OSError as exc:
        raise EntryUnreadable(exc.errno, f"cannot be read: {exc.strerror}", getattr(src, "name", "?")) from exc


def _hash_clone(dst: BinaryIO, size: int, point: str) -> tuple[str, int]:
    """Hash what a reflinked destination holds, read back through a second descriptor of the same file."""
    h = hashlib.sha256()
    n = 0
    with fs.open_regular(f"/proc/self/fd/{dst.fileno()}", limit=None, follow=True) as back:
        while block := back.read(BLOCK):
            h.update(block)
            n += len(block)
            _pause(point, n >= size // 2)
    return h.hexdigest(), n


def copy_hashing(src: BinaryIO, dst: BinaryIO, point: str) -> tuple[str, int]:
    """Copy src → dst (a reflink where possible), returning the sha256 and size of the bytes now in dst."""
    size = os.fstat(src.fileno()).st_size
    try:
        fcntl.ioctl(dst.fileno(), FICLONE, src.fileno())
    except OSError:
        pass  # no reflink here (another file system, tmpfs, ext4): copy
    else:
        dst.seek(0, os.SEEK_END)
        return _hash_clone(dst, size, point)
    hasher = _BlockHasher(beside=size >= HASH_BESIDE_FROM)
    n = 0
    try:
        while block := _read(src):
            hasher.feed(block)  # beside: hashed on the hasher's thread while this one writes the same bytes
            if point == "publish":
                _fault(point)
            dst.write(block)
            n += len(block)
            _pause(point, n >= size // 2)
    finally:
        digest = hasher.close()
    return digest, n


class _BlockHasher:
    """sha256 of the blocks fed to it, in order: in line, or `beside` on a thread of its own. `close` always joins
    that thread (after a failed write too), so none outlives the copy; at most HASH_AHEAD blocks wait for it."""

    def __init__(self, beside: bool) -> None:
        self._sha = hashlib.sha256()
        self._thread: threading.Thread | None = None
        if beside:
            self._blocks: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
            self._room = threading.Semaphore(HASH_AHEAD)
            self._thread = threading.Thread(target=self._run, name="trtls-copy-hash", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while (block := self._blocks.get()) is not None:
            self._sha.update(block)
            self._room.release()

    def feed(self, block: bytes) -> None:
        if self._thread is None:
            self._sha.update(block)
            return
        self._room.acquire()
        self._blocks.put(block)

    def close(self) -> str:
        if self._thread is not None:
            self._blocks.put(None)
            self._thread.join()
        return self._sha.hexdigest()


def hash_reading(src: BinaryIO) -> tuple[str, int]:
    """The sha256 and size of what `src` holds, read to its end (`store ls --verify`); a read that fails is an
    EntryUnreadable."""
    h = hashlib.sha256()
    n = 0
    while block := _read(src):
        h.update(block)
        n += len(block)
    return h.hexdigest(), n
