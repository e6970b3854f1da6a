"""Eviction goes by real use (issue 32, item 6): the most common hit is a "kept" one — the output already holds the
entry's bytes, nothing is copied — and it must count as a use (`used/<key>`), on the fast path and on the full path,
or the engine rebuilt daily is the first one evicted. Two entries, a kept hit on the older one by a real
`trtls build`, then `trtls store gc` down to room for one: the kept one stays."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.store.conftest import copy_store
from tests.store.forged import forged_entry
from tests.store.helpers import entries, run_build, summaries, with_store
from trtls.store.entries import Store


@pytest.mark.parametrize("path", ["fast", "full"])
def test_a_kept_hit_counts_as_a_use_and_its_entry_outlives_an_older_use(
    seeded: tuple[Path, dict], seed_ws: Path, tmp_path: Path, path: str
) -> None:
    store_dir = copy_store(seeded, tmp_path)
    with_store(seed_ws, store_dir)
    key = seeded[1]["engineKey"]
    first = run_build(seed_ws)  # restored: the output now holds the entry's bytes
    assert first.returncode == 0 and summaries(seed_ws)[-1]["outcome"] == "reused", first.stderr
    other = forged_entry(Store(store_dir), tmp_path, "other")
    os.utime(store_dir / "used" / key, (1_000_000, 1_000_000))  # the seed: used long ago
    os.utime(store_dir / "used" / other.key, (2_000_000, 2_000_000))  # the other: used after it
    if path == "full":  # a touched model: the fast path does not trust it, the key is computed again
        onnx = seed_ws / "models" / "demo.onnx"
        os.utime(onnx, ns=(onnx.stat().st_atime_ns, onnx.stat().st_mtime_ns + 1_000_000_000))

    kept = run_build(seed_ws)
    assert kept.returncode == 0, kept.stderr
    summary = summaries(seed_ws)[-1]
    assert summary["outcome"] == "reused" and summary["store"]["outputAlreadyCurrent"] is True
    assert summary["engineArtifact"]["action"] == "kept"
    assert ("the recipe was not re-read" in " ".join(summary["notes"])) == (path == "fast")

    size = (store_dir / "entries" / key / "engine").stat().st_size
    gc = subprocess.run(
        [sys.executable, "-m", "trtls", "store", "gc", str(seed_ws), "--max-size", str(size)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert gc.returncode == 0 and "evicted 1 entries" in gc.stdout, gc.stdout + gc.stderr
    assert [p.name for p in entries(store_dir)] == [key], "the entry of the kept hit was evicted as if unused"
