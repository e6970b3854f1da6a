"""`trtls store gc --max-size` evicts the least recently used entries first — in the order they were last used,
not the order they were stored — and never the entry a build has just used (a real `trtls build` hit)."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

from tests.store.conftest import copy_store
from tests.store.helpers import entries, run_build, summaries, with_store
from trtls.store.entries import Store
from trtls.store.key import key_of_parts


def gc(ws: Path, max_size: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "trtls", "store", "gc", str(ws), "--max-size", str(max_size)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_gc_evicts_least_recently_used_first_never_the_one_just_used(
    seeded: tuple[Path, dict], seed_ws: Path, tmp_path: Path
) -> None:
    store_dir = copy_store(seeded, tmp_path)
    with_store(seed_ws, store_dir)
    store = Store(store_dir)
    (seed_entry,) = store.entries()
    size = seed_entry.size
    engine = bytearray(seed_entry.engine.read_bytes())
    others = []  # three more entries of the same size, stored after the seed (other settings, other bytes)
    for level in (0, 1, 2):
        parts = copy.deepcopy(seed_entry.record["parts"])
        parts["settings"]["optimization_level"] = level
        engine[-1] = level
        path = tmp_path / f"o{level}.engine"
        path.write_bytes(bytes(engine))
        others.append(store.publish(key_of_parts(parts), parts, path, {"buildId": f"o{level}"}, None).key)
    # last used, oldest first: the seed (stored first), then o2, o0, o1 — not the order they were stored in
    order = [seed_entry.key, others[2], others[0], others[1]]
    for i, key in enumerate(order):
        os.utime(store_dir / "used" / key, (1_000_000 + i * 100, 1_000_000 + i * 100))
    listed = subprocess.run(
        [sys.executable, "-m", "trtls", "store", "ls", str(seed_ws), "--json"], capture_output=True, text=True
    )
    assert [row["key"] for row in json.loads(listed.stdout)] == order[::-1]  # newest use first

    done = run_build(seed_ws)  # a hit on the seed: it is now the most recently used
    assert done.returncode == 0 and summaries(seed_ws)[-1]["outcome"] == "reused", done.stderr

    first = gc(seed_ws, 2 * size)  # room for two: o2 and o0 (the least recently used) go
    assert first.returncode == 0 and "evicted 2 entries" in first.stdout, first.stdout + first.stderr
    assert sorted(e.name for e in entries(store_dir)) == sorted([seed_entry.key, others[1]])
    second = gc(seed_ws, size)  # room for one: the one just used stays
    assert second.returncode == 0 and "evicted 1 entries" in second.stdout
    assert [e.name for e in entries(store_dir)] == [seed_entry.key]
    assert not (store_dir / "used" / others[1]).exists()


def test_a_use_time_planted_in_the_future_does_not_keep_its_entry_from_eviction(
    seeded: tuple[Path, dict], seed_ws: Path, tmp_path: Path
) -> None:
    """A use time ten years ahead (a planted one: a use writes this machine's clock) would make its entry the most
    recently used forever; it counts as never used, so that entry goes first."""
    store_dir = copy_store(seeded, tmp_path)
    with_store(seed_ws, store_dir)
    store = Store(store_dir)
    (seed_entry,) = store.entries()
    parts = copy.deepcopy(seed_entry.record["parts"])
    parts["settings"]["optimization_level"] = 0
    engine = bytearray(seed_entry.engine.read_bytes())
    engine[-1] ^= 1
    (tmp_path / "other.engine").write_bytes(bytes(engine))
    other = store.publish(key_of_parts(parts), parts, tmp_path / "other.engine", {"buildId": "other"}, None).key
    os.utime(store_dir / "used" / other, (1_000_000, 1_000_000))  # used long ago, honestly
    ahead = 10 * 365 * 24 * 3600
    os.utime(store_dir / "used" / seed_entry.key, (os.path.getmtime(store_dir) + ahead,) * 2)
    done = gc(seed_ws, seed_entry.size)  # room for one
    assert done.returncode == 0 and "evicted 1 entries" in done.stdout, done.stdout + done.stderr
    assert [e.name for e in entries(store_dir)] == [other]
