"""What `trtls store ls` lists is whole, and quarantine is counted and pruned (issue 32, items 4 and 9): an entry whose
engine file is missing is never listed as valid; `ls --verify` hashes every engine against its record, quarantines
the damaged ones and exits 1; the header counts the quarantined entries and their size; `store gc` prunes quarantined
entries older than a week — and, over the bound, quarantined entries before any whole one — only names trtls makes
there, never through a link. Real `trtls store` processes against a store seeded by a real TensorRT-RTX build."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from tests.store.conftest import copy_store
from tests.store.forged import forged_entry
from tests.store.helpers import entries, with_store
from trtls.store.entries import Store


def store_cli(ws: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "trtls", "store", *args[:1], str(ws), *args[1:]],
        capture_output=True,
        text=True,
        timeout=120,
    )


def _quarantined_name(key: str, days_ago: float) -> str:
    return f"{key}-{time.strftime('%Y%m%d-%H%M%S', time.localtime(time.time() - days_ago * 86400))}-4242"


def test_ls_never_lists_an_entry_whose_engine_is_missing(
    seeded: tuple[Path, dict], seed_ws: Path, tmp_path: Path
) -> None:
    store = copy_store(seeded, tmp_path)
    with_store(seed_ws, store)
    key = seeded[1]["engineKey"]
    (store / "entries" / key / "engine").unlink()
    listed = store_cli(seed_ws, "ls", "--json")
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout) == []
    said = store_cli(seed_ws, "ls")
    assert "0 entries" in said.stdout and "1 quarantined" in said.stdout, said.stdout
    assert entries(store) == [] and [p.name.split("-")[0] for p in (store / "quarantine").iterdir()] == [key]


def test_ls_verify_hashes_every_engine_and_quarantines_a_damaged_one(
    seeded: tuple[Path, dict], seed_ws: Path, tmp_path: Path
) -> None:
    store = copy_store(seeded, tmp_path)
    with_store(seed_ws, store)
    other = forged_entry(Store(store), tmp_path, "other")
    key = seeded[1]["engineKey"]
    engine = store / "entries" / key / "engine"
    data = bytearray(engine.read_bytes())
    data[len(data) // 2] ^= 0xFF  # one flipped byte: same size, so only hashing finds it
    engine.write_bytes(bytes(data))
    assert {row["key"] for row in json.loads(store_cli(seed_ws, "ls", "--json").stdout)} == {key, other.key}

    verified = store_cli(seed_ws, "ls", "--verify")
    assert verified.returncode == 1, verified.stdout + verified.stderr
    said = f"refused: TRT334 store entry {key[:12]}'s engine bytes do not match its sha256; quarantined"
    assert said in verified.stdout
    assert "verified 1 entries; 1 damaged" in verified.stdout and "1 quarantined" in verified.stdout
    assert [p.name for p in entries(store)] == [other.key]
    (moved,) = (store / "quarantine").iterdir()
    assert "is not the recorded" in (moved / "WHY").read_text()

    again = store_cli(seed_ws, "ls", "--verify", "--json")
    assert again.returncode == 0, again.stderr
    assert [(row["key"], row["verified"]) for row in json.loads(again.stdout)] == [(other.key, True)]


def test_ls_verify_json_names_the_damaged_entry(seeded: tuple[Path, dict], seed_ws: Path, tmp_path: Path) -> None:
    store = copy_store(seeded, tmp_path)
    with_store(seed_ws, store)
    key = seeded[1]["engineKey"]
    engine = store / "entries" / key / "engine"
    engine.write_bytes(b"\0" * engine.stat().st_size)
    done = store_cli(seed_ws, "ls", "--verify", "--json")
    assert done.returncode == 1, done.stderr
    (row,) = json.loads(done.stdout)
    assert row["key"] == key and row["verified"] is False and row["damaged"] is True and "quarantined" in row["refused"]


def test_gc_prunes_quarantine_older_than_a_week_only_names_trtls_makes_never_through_a_link(
    seeded: tuple[Path, dict], seed_ws: Path, tmp_path: Path
) -> None:
    store = copy_store(seeded, tmp_path)
    with_store(seed_ws, store)
    key = seeded[1]["engineKey"]
    quarantine = store / "quarantine"
    old, recent = quarantine / _quarantined_name(key, 8), quarantine / _quarantined_name(key, 1)
    for folder in (old, recent):
        folder.mkdir()
        (folder / "engine").write_bytes(b"damaged " * 1000)
        (folder / "WHY").write_text("a test says so\n")
    foreign = quarantine / "notes-of-the-operator"
    foreign.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious").write_text("not the store's")
    (quarantine / _quarantined_name("b" * 64, 30)).symlink_to(outside)  # an old name, but a link: never followed

    listed = store_cli(seed_ws, "ls")
    assert "; 2 quarantined (15.7 KiB)" in listed.stdout, listed.stdout  # only folders of the names trtls makes
    done = store_cli(seed_ws, "gc")
    assert done.returncode == 0, done.stderr
    assert f"pruned quarantine/{old.name}" in done.stdout and "1 quarantined entries pruned" in done.stdout
    assert "evicted 0 entries" in done.stdout
    assert not old.exists() and recent.is_dir() and foreign.is_dir() and (outside / "precious").is_file()
    assert [p.name for p in entries(store)] == [key]
    assert "; 1 quarantined" in store_cli(seed_ws, "ls").stdout


def test_gc_over_the_bound_prunes_quarantine_before_a_whole_entry(
    seeded: tuple[Path, dict], seed_ws: Path, tmp_path: Path
) -> None:
    store = copy_store(seeded, tmp_path)
    with_store(seed_ws, store)
    key = seeded[1]["engineKey"]
    size = (store / "entries" / key / "engine").stat().st_size
    recent = store / "quarantine" / _quarantined_name(key, 0.1)
    recent.mkdir()
    (recent / "engine").write_bytes(b"damaged " * 1000)
    done = store_cli(seed_ws, "gc", "--max-size", str(size))  # room for the entry alone
    assert done.returncode == 0, done.stderr
    assert "evicted 0 entries" in done.stdout and "1 quarantined entries pruned" in done.stdout, done.stdout
    assert not recent.exists() and [p.name for p in entries(store)] == [key]
