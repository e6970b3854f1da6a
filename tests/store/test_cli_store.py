"""`trtls store ls` and `trtls store gc` on a store holding a real engine (the seeded `demo`)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.store.conftest import copy_store
from tests.store.helpers import entries, with_store


def trtls(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "trtls", *args], capture_output=True, text=True, timeout=120, cwd=cwd, env=env
    )


def test_ls_lists_and_gc_evicts_down_to_the_bound(seeded: tuple[Path, dict], seed_ws: Path, tmp_path: Path) -> None:
    store = copy_store(seeded, tmp_path)
    with_store(seed_ws, store)
    listed = trtls("store", "ls", str(seed_ws), "--json")
    assert listed.returncode == 0, listed.stderr
    (row,) = json.loads(listed.stdout)
    assert row["key"] == seeded[1]["engineKey"] and row["buildId"] == seeded[1]["buildId"]
    assert row["size"] == seeded[1]["engineArtifact"]["size"]
    kept = trtls("store", "gc", str(seed_ws))  # within the default bound: nothing goes
    assert kept.returncode == 0 and "evicted 0 entries" in kept.stdout and len(entries(store)) == 1
    gone = trtls("store", "gc", str(seed_ws), "--max-size", "1MiB")
    assert gone.returncode == 0 and "evicted 1 entries" in gone.stdout and entries(store) == []


def test_without_a_recipe_the_default_store_is_listed(seeded: tuple[Path, dict], tmp_path: Path) -> None:
    import os

    store = copy_store(seeded, tmp_path)
    env = {**os.environ, "TRTLS_STORE": str(store)}
    listed = trtls("store", "ls", cwd=tmp_path, env=env)
    assert listed.returncode == 0 and listed.stdout.startswith(f"{store} (read_write): 1 entries")
