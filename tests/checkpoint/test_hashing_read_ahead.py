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
    monkeypatch.setattr(hashing, "usable_cpus", lambda: 4)
    got = hash_files([big], None)
    assert got[big.absolute()].sha256 == hashlib.sha256(big.read_bytes()).hexdigest()
    assert seen == [True]  # one file, four cores: its reading gets a core of its own
    seen.clear()
    hash_files([big], None, workers=4)
    monkeypatch.setattr(hashing, "usable_cpus", lambda: 1)
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


# The trial (module doc): a large file hashes a few blocks untimed, then measures in line, read ahead, in line, then
# hashes the rest the faster way. Every byte is hashed once and in order wherever the file's end falls, and one pick
# is counted per file that got through its trial.
TRIAL = 2  # blocks for TRIAL_BLOCKS in these tests: the parts are 2 (untimed), 2, 4 and 2 buffers long


@pytest.mark.parametrize(
    ("size", "through_the_trial"),
    [
        (1 * BUF + 7, False),  # ends in the untimed first part
        (2 * BUF, False),  # the first part reads exactly its blocks; the next meets the end
        (3 * BUF + 5, False),  # ends in the first timed part (in line)
        (6 * BUF + 3, False),  # ends in the read-ahead part
        (8 * BUF + 11, False),  # ends in the last in-line part
        (10 * BUF, True),  # the last in-line part reads its blocks without meeting the end: a pick for an empty rest
        (15 * BUF + 5, True),  # the rest after the trial, hashed the way it picked
    ],
)
def test_the_trial_hashes_every_byte_once_wherever_the_file_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, size: int, through_the_trial: bool
) -> None:
    monkeypatch.setattr(hashing, "TRIAL_FROM", 0)
    monkeypatch.setattr(hashing, "TRIAL_BLOCKS", TRIAL)
    path = tmp_path / "weights.bin"
    path.write_bytes(os.urandom(size))
    before = sum(hashing.TRIAL_OUTCOMES.values())
    assert sha256_file(path, read_ahead=True)[0] == hashlib.sha256(path.read_bytes()).hexdigest()
    assert sum(hashing.TRIAL_OUTCOMES.values()) - before == (1 if through_the_trial else 0)
    assert readers() == []


def test_a_file_below_the_trial_size_or_hashed_without_spare_cores_makes_no_pick(big: Path) -> None:
    assert big.stat().st_size < hashing.TRIAL_FROM
    before = dict(hashing.TRIAL_OUTCOMES)
    sha256_file(big, read_ahead=True)
    sha256_file(big, read_ahead=False)
    assert hashing.TRIAL_OUTCOMES == before


def test_a_large_file_hashed_with_cores_to_spare_picks_one_way(tmp_path: Path) -> None:
    path = tmp_path / "model.onnx.data"
    path.write_bytes(os.urandom(hashing.TRIAL_FROM + 3 * BUF + 1))
    before = sum(hashing.TRIAL_OUTCOMES.values())
    assert sha256_file(path, read_ahead=True)[0] == hashlib.sha256(path.read_bytes()).hexdigest()
    assert sum(hashing.TRIAL_OUTCOMES.values()) == before + 1
    assert readers() == []


def test_a_read_ahead_of_some_blocks_reads_no_further(big: Path) -> None:
    data = big.read_bytes()
    with open(big, "rb") as f:
        h = hashlib.sha256()
        assert _hash_read_ahead(f, h, None, big, 2) is False  # type: ignore[arg-type]
        assert f.tell() == 2 * BUF  # the next part starts where this one stopped: nothing read and dropped
        assert h.hexdigest() == hashlib.sha256(data[: 2 * BUF]).hexdigest()
    assert readers() == []


def test_a_cancel_during_the_trial_stops_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hashing, "TRIAL_FROM", 0)
    monkeypatch.setattr(hashing, "TRIAL_BLOCKS", TRIAL)
    path = tmp_path / "weights.bin"
    path.write_bytes(os.urandom(20 * BUF))
    calls = 0

    def cancel() -> bool:  # the fifth block: inside the trial's read-ahead part
        nonlocal calls
        calls += 1
        return calls >= 5

    before = dict(hashing.TRIAL_OUTCOMES)
    with pytest.raises(HashCancelled):
        sha256_file(path, cancel, read_ahead=True)
    assert calls == 5
    assert hashing.TRIAL_OUTCOMES == before
    assert readers() == []
