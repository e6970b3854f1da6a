"""A damaged store entry that cannot be moved to quarantine/ is rebuilt at every build (never used, never stale):
it was said twice a build as a TRT334 whose words did not say it would come back, and `trtls store ls` exited 0
without it in `--json`. Now it is TRT342, once a build, naming the folder and what ends it; `store ls` lists it
(`refused: TRT342`, a `--json` row) and exits 1. Real builds, a real store; the entry's folder made immutable with
a real `chattr +i` (not even root moves it), or served read-only by the recipe."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.store.conftest import copy_store
from tests.store.helpers import run_build, summaries, with_store
from tests.store.test_quarantine import store_cli


@pytest.fixture
def damaged(seeded: tuple[Path, dict], seed_ws: Path, tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """The seeded store's one entry with its engine cut to 100 bytes: (store, entry folder)."""
    store = copy_store(seeded, tmp_path)
    folder = store / "entries" / seeded[1]["engineKey"]
    with (folder / "engine").open("r+b") as engine:
        engine.truncate(100)
    yield store, folder
    subprocess.run(["chattr", "-i", str(folder)], capture_output=True)


def _builds_say_it_once(ws: Path, folder: Path, times: int = 2) -> None:
    for _ in range(times):
        (ws / "build" / "demo.engine").unlink(missing_ok=True)
        done = run_build(ws)
        assert done.returncode == 0, done.stderr
        assert done.stderr.count("TRT342") == 1 and "TRT334" not in done.stderr, done.stderr
        assert f"store entry {folder.name[:12]}'s engine is 100 bytes" in done.stderr
        assert "every build of this key rebuilds the engine" in done.stderr
        assert str(folder) in done.stderr or "read-only" in done.stderr  # what ends it, located
        summary = summaries(ws)[-1]
        assert summary["outcome"] == "built"
        assert [w[:6] for w in summary["store"]["warnings"]].count("TRT342") == 1, summary["store"]["warnings"]
    assert (folder / "engine").stat().st_size == 100, "left in place, as it could not be moved"


def _ls_reports_it(ws: Path, key: str) -> None:
    listed = store_cli(ws, "ls")
    assert listed.returncode == 1 and f"refused: TRT342 store entry {key[:12]}" in listed.stdout, listed.stdout
    rows = json.loads(store_cli(ws, "ls", "--json").stdout)
    assert [(r["key"], r["code"], r["damaged"]) for r in rows] == [(key, "TRT342", True)], rows
    verified = store_cli(ws, "ls", "--verify")
    assert verified.returncode == 1 and "verified 0 entries; 1 damaged" in verified.stdout, verified.stdout


def test_an_entry_that_cannot_be_moved_aside_is_said_once_a_build_and_listed(
    damaged: tuple[Path, Path], seed_ws: Path
) -> None:
    store, folder = damaged
    if subprocess.run(["chattr", "+i", str(folder)], capture_output=True).returncode != 0:
        pytest.skip("chattr +i is not allowed here (needs root and a file system that supports it)")
    with_store(seed_ws, store)
    _builds_say_it_once(seed_ws, folder)
    done = run_build(seed_ws, "--rebuild")  # no lookup: the publish that cannot replace it names it
    assert done.returncode == 0 and "TRT333" in done.stderr and str(folder) in done.stderr, done.stderr
    _ls_reports_it(seed_ws, folder.name)
    assert list((store / "quarantine").iterdir()) == []


def test_an_entry_a_read_only_store_serves_is_said_once_a_build_and_listed(
    damaged: tuple[Path, Path], seed_ws: Path
) -> None:
    store, folder = damaged
    with_store(seed_ws, store, mode="read")
    _builds_say_it_once(seed_ws, folder)
    _ls_reports_it(seed_ws, folder.name)
