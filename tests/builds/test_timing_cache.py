"""Timing-cache policy: digests catch damaged files before TensorRT, identity changes quarantine,
cancelled builds never write back, saving merges under a lock — plus real builds with damaged caches."""

from __future__ import annotations

import json
import multiprocessing
import os
from pathlib import Path

import pytest

from trtls.builds import timing_cache as tc

IDENTITY = {
    "module": "tensorrt",
    "version": "10.9",
    "device": "L4",
    "compute_capability": "8.9",
    "settings": {"optimization_level": 3},
}


def concat(old: bytes, new: bytes) -> bytes:
    """A stand-in for ITimingCache.combine that keeps both inputs visible (a real merge keeps both sets of timings)."""
    return old + b"|" + new


def test_missing_file_is_cold_and_rtx_is_not_applicable(tmp_path: Path) -> None:
    cache = tmp_path / "c.cache"
    assert tc.plan_cache(cache, "read_write", IDENTITY, True, 3, tmp_path / "q").decision == "cold"
    plan = tc.plan_cache(cache, "read_write", IDENTITY, False, 3, tmp_path / "q")
    assert plan.decision == "not_applicable" and "RTX" in plan.reason
    assert tc.plan_cache(cache, "off", IDENTITY, True, 3, tmp_path / "q").decision == "cold"
    assert tc.plan_cache(cache, "read", IDENTITY, True, 0, tmp_path / "q").decision == "not_applicable"


@pytest.mark.parametrize("damage", ["truncated", "flipped", "random"])
def test_damaged_cache_is_quarantined_by_digest(tmp_path: Path, damage: str) -> None:
    cache = tmp_path / "c.cache"
    tc.save_merged(cache, b"ptrtd" + bytes(range(256)) * 4, IDENTITY, concat)
    data = bytearray(cache.read_bytes())
    if damage == "truncated":
        data = data[: len(data) // 3]
    elif damage == "flipped":
        data[100] ^= 0x01
    else:
        data = bytearray(os.urandom(len(data)))
    cache.write_bytes(bytes(data))
    plan = tc.plan_cache(cache, "read_write", IDENTITY, True, 3, tmp_path / "q")
    assert plan.decision == "quarantined" and plan.data is None and "sha256 mismatch" in plan.reason
    assert not cache.exists() and Path(plan.quarantined_to).read_bytes() == bytes(data)
    notes = [p for p in (tmp_path / "q").iterdir() if p.name.endswith(".reason.txt")]
    assert notes and "sha256" in notes[0].read_text()


def test_identity_change_is_quarantined(tmp_path: Path) -> None:
    cache = tmp_path / "c.cache"
    tc.save_merged(cache, b"timings", IDENTITY, concat)
    other = {**IDENTITY, "compute_capability": "12.0"}
    plan = tc.plan_cache(cache, "read", other, True, 3, tmp_path / "q")
    assert plan.decision == "quarantined" and "compute_capability" in plan.reason


def test_valid_cache_is_reused_and_logger_corruption_quarantines(tmp_path: Path) -> None:
    cache = tmp_path / "c.cache"
    tc.save_merged(cache, b"timings", IDENTITY, concat)
    plan = tc.plan_cache(cache, "read", IDENTITY, True, 3, tmp_path / "q")
    assert plan.decision == "reused" and plan.data == b"timings"
    # TensorRT never raises on a bad cache: it logs. The logger's words decide.
    logged = [
        "Failed to deserialize timing cache. Returning an empty timing cache.",
        "The timing cache will not be used!",
    ]
    plan = tc.after_load(plan, logged, True, tmp_path / "q")
    assert plan.decision == "quarantined" and "Failed to deserialize" in plan.reason and not cache.exists()


def test_without_a_cuda_device_the_logger_is_inconclusive(tmp_path: Path) -> None:
    cache = tmp_path / "c.cache"
    cache.write_bytes(b"foreign cache, no trtls sidecar")
    plan = tc.plan_cache(cache, "read", IDENTITY, False, 3, tmp_path / "q")
    logged = [
        "[cudaResources.cpp::ScopedCudaStream::25] Error Code 1: Cuda Runtime (...)",
        "Failed to deserialize timing cache. Returning an empty timing cache.",
    ]
    plan = tc.after_load(plan, logged, True, tmp_path / "q")
    assert plan.decision == "not_applicable" and "could not check it here" in plan.reason and cache.exists()
    assert "unverified" in plan.reason and "not written by trtls" in plan.reason


@pytest.mark.parametrize("outcome", ["cancelled", "failed"])
def test_a_stopped_build_never_writes_back(tmp_path: Path, outcome: str) -> None:
    cache = tmp_path / "c.cache"
    tc.save_merged(cache, b"old", IDENTITY, concat)
    before = cache.read_bytes()
    plan = tc.plan_cache(cache, "read_write", IDENTITY, True, 3, tmp_path / "q")
    plan, written = tc.after_build(plan, outcome, True, lambda: b"new", concat)
    assert (plan.decision, written) == ("discarded", False) and cache.read_bytes() == before


def test_successful_build_merges_and_records_digest(tmp_path: Path) -> None:
    cache = tmp_path / "c.cache"
    tc.save_merged(cache, b"old", IDENTITY, concat)
    plan = tc.plan_cache(cache, "read_write", IDENTITY, True, 3, tmp_path / "q")
    plan, written = tc.after_build(plan, "built", True, lambda: b"new", concat)
    assert (plan.decision, written) == ("updated", True) and cache.read_bytes() == b"old|new"
    meta = json.loads(tc.identity_path(cache).read_text())
    assert meta["identity"] == IDENTITY and meta["size"] == len(b"old|new")


def _writer(path: str, tag: bytes, n: int) -> None:
    for i in range(n):
        tc.save_merged(Path(path), tag + str(i).encode(), IDENTITY, concat)


def test_concurrent_writers_lose_nothing_and_never_tear(tmp_path: Path) -> None:
    cache = tmp_path / "shared.cache"
    procs = [multiprocessing.Process(target=_writer, args=(str(cache), tag, 25)) for tag in (b"A", b"B")]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    data = cache.read_bytes()
    parts = data.split(b"|")
    assert sorted(parts) == sorted([b"A%d" % i for i in range(25)] + [b"B%d" % i for i in range(25)]), (
        "every merge kept"
    )
    meta = json.loads(tc.identity_path(cache).read_text())
    import hashlib

    assert meta["sha256"] == hashlib.sha256(data).hexdigest(), "file and sidecar agree"
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
