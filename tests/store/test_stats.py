"""`trtls store stats` after real `trtls build` runs (issue 32, item 10: no hit/miss statistics, where ccache has
`-s` and Bazel its "N remote cache hit" line): each build's hit or miss is counted with its reason, and a hit's time
saved is the build time of the engine it reused."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from tests.store.conftest import copy_store
from tests.store.helpers import run_build, summaries, with_store


def trtls(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "trtls", *args], capture_output=True, text=True, timeout=120)


def _set_level(ws: Path, old: int, new: int) -> None:
    recipe = ws / "trtls.toml"
    recipe.write_text(recipe.read_text().replace(f"optimization_level = {old}", f"optimization_level = {new}"))


def _stat_lines(store: Path) -> list[str]:
    return sorted(line for f in (store / "stats").glob("*.jsonl") for line in f.read_text().splitlines())


def test_builds_are_counted_as_hits_and_misses_by_reason_with_the_time_they_saved(
    workspace: Path, tmp_path: Path
) -> None:
    store = tmp_path / "store"
    with_store(workspace, store)
    for step in ("first", "again", "level 4", "level 3 again", "--rebuild"):
        if step == "level 4":
            _set_level(workspace, 3, 4)
        if step == "level 3 again":
            _set_level(workspace, 4, 3)
        done = run_build(workspace, *(["--rebuild"] if step == "--rebuild" else []))
        assert done.returncode == 0, (step, done.stderr)
    runs = summaries(workspace)
    assert [s["outcome"] for s in runs] == ["built", "reused", "built", "reused", "built"]
    entry = json.loads((store / "entries" / runs[0]["engineKey"] / "entry.json").read_text())
    first_build_s = entry["build"]["durationS"]
    assert first_build_s == runs[0]["durationS"] and first_build_s > 0

    shown = trtls("store", "stats", str(workspace), "--json")
    assert shown.returncode == 0, shown.stderr
    c = json.loads(shown.stdout)
    assert c["hits"]["total"] == 2 and c["hits"]["fast"] >= 1  # the unchanged second run takes the fast path
    assert c["misses"] == {
        "total": 3,
        "byReason": {"first build of this engine table": 1, "settings": 1, "--rebuild": 1},
    }
    assert c["hitRate"] == 0.4
    assert abs(c["timeSavedS"] - 2 * first_build_s) < 0.002  # both hits reused the first build's engine
    assert c["perEngine"]["demo"]["hits"] == 2 and c["perEngine"]["demo"]["misses"] == 3
    assert list(c["perDay"]) == [time.strftime("%Y-%m-%d", time.gmtime())]
    assert c["entries"] == 2 and c["size"] == sum(
        json.loads(p.read_text())["engine"]["size"] for p in (store / "entries").glob("*/entry.json")
    )

    text = trtls("store", "stats", str(workspace))
    assert text.returncode == 0, text.stderr
    said = {" ".join(line.split()) for line in text.stdout.splitlines()}
    assert "hits 2 40.0 %" in said and "misses 3" in said
    assert "first build of this engine table 1" in said and "settings 1" in said and "--rebuild 1" in said
    assert any(line.startswith("demo 2 3 40.0 %") for line in said), text.stdout


def test_a_hit_from_a_read_only_store_is_not_recorded_and_from_a_read_write_one_is(
    seeded: tuple[Path, dict], seed_ws: Path, tmp_path: Path
) -> None:
    store = copy_store(seeded, tmp_path)
    before = _stat_lines(store)  # the seed's own miss
    assert len(before) == 1 and json.loads(before[0])["event"] == "miss"
    with_store(seed_ws, store, mode="read")
    done = run_build(seed_ws)
    assert done.returncode == 0 and summaries(seed_ws)[-1]["outcome"] == "reused", done.stderr
    assert _stat_lines(store) == before  # mode = "read": the store is never written, its statistics neither
    recipe = seed_ws / "trtls.toml"
    recipe.write_text(recipe.read_text().replace('mode = "read"', 'mode = "read_write"'))
    (seed_ws / "build" / "demo.engine").unlink()
    done = run_build(seed_ws)
    assert done.returncode == 0 and summaries(seed_ws)[-1]["outcome"] == "reused", done.stderr
    added = [json.loads(line) for line in _stat_lines(store) if line not in before]
    assert [(e["event"], e["how"], e["key"]) for e in added] == [("hit", "restored", seeded[1]["engineKey"])]
    assert added[0]["savedS"] == seeded[1]["durationS"] and added[0]["from"] == seeded[1]["buildId"]
