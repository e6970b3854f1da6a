"""`trtls store stats` says how many entries share one engine (docs/store.md, "Content dedup": the local store keeps
one engine per entry on purpose, and the figure to watch is how much of it is duplicates — issue 32 found 38 entries
holding 19 distinct engines, and nothing said so)."""

from __future__ import annotations

from pathlib import Path

from tests.store.forged import forged_entry
from trtls.cli.store_explain import stats_lines
from trtls.store.entries import Store
from trtls.store.stats import stats


def test_stats_count_the_entries_that_share_one_engine_and_the_bytes_their_copies_take(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    store.check()
    same = b"one engine, built twice under two keys " * 50
    a = forged_entry(store, tmp_path, "o3", same)
    forged_entry(store, tmp_path, "o3-renamed-model", same)
    forged_entry(store, tmp_path, "o5", same)
    forged_entry(store, tmp_path, "fp16", b"another engine " * 40)

    counts = stats(store)
    assert counts["entries"] == 4
    assert counts["dedup"] == {"distinctEngines": 2, "sharedEntries": 3, "duplicateSize": 2 * a.size}
    shown = "\n".join(stats_lines(counts))
    assert "distinct engines                  2 (3 entries share one (" in shown, shown


def test_a_store_whose_entries_are_all_different_says_so(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    store.check()
    forged_entry(store, tmp_path, "o3", b"first " * 30)
    forged_entry(store, tmp_path, "o5", b"second " * 30)
    counts = stats(store)
    assert counts["dedup"] == {"distinctEngines": 2, "sharedEntries": 0, "duplicateSize": 0}
    assert "2 (no two entries hold the same engine)" in "\n".join(stats_lines(counts))
    empty = stats(Store(tmp_path / "empty"))
    assert empty["dedup"]["distinctEngines"] == 0 and not any("distinct" in line for line in stats_lines(empty))
