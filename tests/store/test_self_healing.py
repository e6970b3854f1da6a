"""A broken entry heals (issue 32, item 4): every use checks what is cheap to check — the record, and the engine file's
type and size by one lstat — so an entry whose engine is missing, not a regular file or of another size is
quarantined by the lookup itself and rebuilt, even when the output already holds the right bytes (a "kept" hit used
to hide it); a `--rebuild` publishes over it instead of finding it "already stored"; an entry whose record is gone is
replaced by the next publish of its key, even when quarantine could not move it aside. Real `trtls build`s against a
store seeded by a real TensorRT-RTX build."""

from __future__ import annotations

import hashlib
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.store.conftest import copy_store
from tests.store.forged import forged_entry
from tests.store.helpers import entries, run_build, summaries, with_store
from trtls.store.entries import Refused, Store


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _whole(store: Path, key: str) -> bool:
    got = Store(store).get(key)
    return got is not None and sha(got.engine) == got.sha256


@pytest.mark.parametrize("damage", ["missing", "folder", "truncated"])
def test_a_kept_hit_on_a_damaged_entry_quarantines_and_rebuilds_it(
    seeded: tuple[Path, dict], seed_ws: Path, tmp_path: Path, damage: str
) -> None:
    store = copy_store(seeded, tmp_path)
    with_store(seed_ws, store)
    first = run_build(seed_ws)  # the output now holds the entry's bytes
    assert first.returncode == 0 and summaries(seed_ws)[-1]["outcome"] == "reused", first.stderr
    key = seeded[1]["engineKey"]
    engine = store / "entries" / key / "engine"
    good = engine.read_bytes()
    engine.unlink()
    if damage == "folder":
        engine.mkdir()
    elif damage == "truncated":
        engine.write_bytes(good[: len(good) // 2])

    again = run_build(seed_ws)
    assert again.returncode == 0, again.stderr
    summary = summaries(seed_ws)[-1]
    assert summary["outcome"] == "built", "a damaged entry was served as up to date"
    assert summary["engineKey"] == key and summary["store"]["used"] and summary["store"]["key"] == key
    assert _whole(store, key)  # the rebuild published the key again: the store is whole
    (moved,) = (store / "quarantine").iterdir()
    assert moved.name.startswith(f"{key}-") and "engine" in (moved / "WHY").read_text()


def test_rebuild_publishes_over_an_entry_whose_engine_is_missing(
    seeded: tuple[Path, dict], seed_ws: Path, tmp_path: Path
) -> None:
    store = copy_store(seeded, tmp_path)
    with_store(seed_ws, store)
    key = seeded[1]["engineKey"]
    (store / "entries" / key / "engine").unlink()
    done = run_build(seed_ws, "--rebuild")
    assert done.returncode == 0, done.stderr
    summary = summaries(seed_ws)[-1]
    assert summary["outcome"] == "built" and summary["engineKey"] == key
    assert _whole(store, key), "--rebuild left the broken entry in the store"
    assert "engine file is missing" in (summary["store"]["replaced"] or {}).get("damaged", "")


def test_a_publish_of_the_same_bytes_repairs_an_entry_whose_engine_is_missing(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    store.check()
    entry = forged_entry(store, tmp_path, "repaired")
    entry.engine.unlink()
    again = store.publish(entry.key, entry.record["parts"], tmp_path / "repaired.engine", {"buildId": "b2"}, None)
    assert again.build["buildId"] == "b2" and sha(again.engine) == entry.sha256  # not the broken one, "same sha"
    assert [p.name for p in entries(store.root)] == [entry.key]


@pytest.fixture
def frozen_quarantine(tmp_path: Path) -> Iterator[Path]:
    store = Store(tmp_path / "store")
    store.check()
    folder = store.root / "quarantine"
    if subprocess.run(["chattr", "+i", str(folder)], capture_output=True).returncode != 0:
        pytest.skip("chattr +i is not allowed here (needs root and a file system that supports it)")
    try:
        yield store.root
    finally:
        subprocess.run(["chattr", "-i", str(folder)], capture_output=True)


def test_a_publish_over_a_leftover_that_quarantine_could_not_move_replaces_it(
    frozen_quarantine: Path, tmp_path: Path
) -> None:
    """The entry's record is gone and quarantine cannot move it (its folder immutable): the publish's rename meets
    the leftover — not another process's whole entry — moves it aside and publishes."""
    store = Store(frozen_quarantine)
    entry = forged_entry(store, tmp_path, "leftover")
    (entry.folder / "entry.json").unlink()
    with pytest.raises(Refused, match="no record"):
        store.get(entry.key)
    assert entry.folder.is_dir()  # still there: quarantine could not move it
    again = store.publish(entry.key, entry.record["parts"], tmp_path / "leftover.engine", {"buildId": "b2"}, None)
    assert again.build["buildId"] == "b2" and _whole(store.root, entry.key)
    assert list((store.root / "tmp").iterdir()) == []
