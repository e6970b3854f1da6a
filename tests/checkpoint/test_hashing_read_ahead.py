"""checkpoint.hashing's read-ahead (a file read on a thread of its own while it is hashed): the same digests as a plain
sha256, a cancel that stops both threads, a read error raised where the hash was asked for, and every thread it
started ended when it returns (the file is never read after it is closed)."""

from __future__ import annotations

import hashlib
import io
import os
import threading
from pathlib import Path

import pytest

from trtls.checkpoint import hashing
from trtls.checkpoint.hashing import BUF, HashCancelled, _hash_read_ahead, hash_files, sha256_file


def readers() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name == "trtls-hash-read"]


@pytest.fixture
def big(tmp_path: Path) -> Path:
    path = tmp_path / "weights.bin"
    path.write_bytes(os.urandom(5 * BUF + 12345))  # not a whole number of buffers: the last read is short
    return path


def test_read_ahead_gives_the_plain_digest(big: Path) -> None:
    want = hashlib.sha256(big.read_bytes()).hexdigest()
    assert sha256_file(big, read_ahead=True)[0] == want
    assert sha256_file(big, read_ahead=False)[0] == want
    assert readers() == []


def test_a_file_hashed_with_cores_to_spare_is_read_ahead(big: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[bool] = []
    real = hashing.sha256_file

    def spy(path: object, cancel: object = None, *, follow: bool = False, read_ahead: bool = False) -> object:
        seen.append(read_ahead)
        return real(path, cancel, follow=follow, read_ahead=read_ahead)  # type: ignore[arg-type]

    monkeypatch.setattr(hashing, "sha256_file", spy)
    monkeypatch.setattr(hashing.os, "cpu_count", lambda: 4)
    got = hash_files([big], None)
    assert got[big.absolute()].sha256 == hashlib.sha256(big.read_bytes()).hexdigest()
    assert seen == [True]  # one file, four cores: its reading gets a core of its own
    seen.clear()
    hash_files([big], None, workers=4)
    monkeypatch.setattr(hashing.os, "cpu_count", lambda: 1)
    hash_files([big], None)
    assert seen == [True, False]  # one core: nothing to read ahead on


def test_a_cancel_stops_the_reader_too(big: Path) -> None:
    calls = 0

    def cancel() -> bool:
        nonlocal calls
        calls += 1
        return calls >= 2

    with pytest.raises(HashCancelled):
        sha256_file(big, cancel, read_ahead=True)
    assert calls == 2
    assert readers() == []


class FailingReader(io.RawIOBase):
    """Two good buffers, then the error a disk gives."""

    def __init__(self) -> None:
        self.reads = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buf: object) -> int:
        self.reads += 1
        if self.reads > 2:
            raise OSError(5, "Input/output error")
        view = memoryview(buf)  # type: ignore[arg-type]
        view[:] = b"\0" * len(view)
        return len(view)


def test_a_read_error_is_raised_to_the_caller_and_the_reader_ends() -> None:
    with pytest.raises(OSError, match="Input/output error"):
        _hash_read_ahead(FailingReader(), hashlib.sha256(), None, "disk")  # type: ignore[arg-type]
    assert readers() == []
