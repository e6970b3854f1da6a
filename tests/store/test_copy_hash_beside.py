"""The store's copy of a large engine hashes each block on a second thread while it is written
(store/copying.py `_BlockHasher`): the digest is still that of every byte written, in order, and the thread never
outlives the copy — after a whole copy, a write that fails (a full disk) or a read of the entry that fails."""

from __future__ import annotations

import errno
import hashlib
import os
import threading
from pathlib import Path

import pytest

from trtls.store import copying


def _hash_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "trtls-copy-hash"]


def _engine(path: Path) -> bytes:
    """Random bytes over the threshold, with a tail that is not a whole block."""
    data = os.urandom(copying.HASH_BESIDE_FROM + 3 * copying.BLOCK + 12_345)
    path.write_bytes(data)
    return data


def test_a_large_copy_hashes_every_byte_written_in_order_and_ends_its_thread(tmp_path: Path) -> None:
    data = _engine(tmp_path / "engine")
    started = []
    real = copying._BlockHasher.__init__

    def counted(self: copying._BlockHasher, beside: bool) -> None:
        real(self, beside)
        if beside:
            started.append(self)

    copying._BlockHasher.__init__ = counted  # type: ignore[method-assign]
    try:
        with open(tmp_path / "engine", "rb") as src, open(tmp_path / "copy", "wb") as dst:
            digest, size = copying.copy_hashing(src, dst, "publish")
    finally:
        copying._BlockHasher.__init__ = real  # type: ignore[method-assign]
    assert len(started) == 1, "a copy over the threshold hashes beside the write"
    assert (digest, size) == (hashlib.sha256(data).hexdigest(), len(data))
    assert (tmp_path / "copy").read_bytes() == data
    assert not _hash_threads()


def test_a_small_copy_hashes_in_line(tmp_path: Path) -> None:
    data = os.urandom(copying.BLOCK + 7)
    (tmp_path / "engine").write_bytes(data)
    before = threading.active_count()
    with open(tmp_path / "engine", "rb") as src, open(tmp_path / "copy", "wb") as dst:
        assert copying.copy_hashing(src, dst, "restore") == (hashlib.sha256(data).hexdigest(), len(data))
    assert threading.active_count() == before


def test_a_full_disk_half_way_ends_the_hash_thread_with_the_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _engine(tmp_path / "engine")
    monkeypatch.setenv("TRTLS_STORE_FAULT", "enospc")
    with open(tmp_path / "engine", "rb") as src, open(tmp_path / "copy", "wb") as dst:
        with pytest.raises(OSError) as raised:
            copying.copy_hashing(src, dst, "publish")
    assert raised.value.errno == errno.ENOSPC
    assert not _hash_threads(), "the failed copy joined its hash thread"


class _FailingAfter:
    """A real file whose reads fail with EIO after `good` blocks (a damaged entry)."""

    def __init__(self, f, good: int):
        self._f, self._left = f, good

    def fileno(self) -> int:
        return int(self._f.fileno())

    def read(self, n: int) -> bytes:
        if self._left == 0:
            raise OSError(errno.EIO, "Input/output error")
        self._left -= 1
        return bytes(self._f.read(n))


def test_an_entry_that_cannot_be_read_half_way_is_unreadable_and_ends_the_hash_thread(tmp_path: Path) -> None:
    _engine(tmp_path / "engine")
    with open(tmp_path / "engine", "rb") as f, open(tmp_path / "copy", "wb") as dst:
        with pytest.raises(copying.EntryUnreadable):
            copying.copy_hashing(_FailingAfter(f, 5), dst, "restore")  # type: ignore[arg-type]
    assert not _hash_threads()
