"""Retention for `.trtls/` (issue 22, item 10): `trtls gc` and the light pass after a build, on real evidence.

One real build's run folder is copied under other build ids and dates (real files, real sizes), then the real
`trtls gc` process runs on the folder. Before: nothing was ever removed and history.json kept every config."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

from .cli_procs import CliBuild

DAY = 86400.0


def _gc(ws: Path, *args: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-m", "trtls", "gc", str(ws), "--json", *args], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _real_run(ws: Path) -> Path:
    build = CliBuild(ws, "demo")
    assert build.finish() == 0
    (run,) = (ws / ".trtls" / "runs").iterdir()
    return run


def _copy(template: Path, rid: str, started: float, **fields: object) -> Path:
    dest = template.parent / rid
    shutil.copytree(template, dest)
    summary = json.loads((dest / "summary.json").read_text())
    summary.update(buildId=rid, startedAt=started, **fields)
    (dest / "summary.json").write_text(json.dumps(summary))
    return dest


def _rid(engine: str, n: int) -> str:
    return f"{engine}-20260101-{n:06d}-{n:06x}"


def _ids(result: dict, key: str) -> set[str]:
    return {r["buildId"] for r in result[key]}


def test_gc_keeps_what_records_point_to_and_removes_the_rest(workspace: Path) -> None:
    real = _real_run(workspace)
    now = time.time()
    # 12 old failed demo runs, one old good large build, one interrupted build, a route's build, a matrix and its cell
    old = [_copy(real, _rid("demo", i), now - (40 + i) * DAY, outcome="failed") for i in range(12)]
    good_large = _copy(real, _rid("large", 1), now - 90 * DAY, engine="large", outcome="built")
    interrupted = _copy(real, _rid("demo", 100), now - 60 * DAY)
    (interrupted / "running.json").write_text("{}")
    routed = _copy(real, _rid("demo", 101), now - 50 * DAY, outcome="failed")
    route_dir = workspace / ".trtls" / "routes" / "r"
    route_dir.mkdir(parents=True)
    (route_dir / "summary.json").write_text(json.dumps({"gates": {"environment": {"buildId": routed.name}}}))
    matrix = _copy(real, _rid("demo", 102), now - 70 * DAY, kind="matrix", engine=None, outcome="failed")
    cell = _copy(real, _rid("demo", 103), now - 70 * DAY, outcome="failed", cell="o0", parentId=matrix.name)
    (route_dir / "more.json").write_text(json.dumps({"cell": cell.name}))  # the cell is named; its matrix goes too

    dry = _gc(workspace, "--dry-run")
    assert dry["dryRun"] and all(p.exists() for p in old), "--dry-run removed something"
    result = _gc(workspace)
    assert _ids(result, "removed") == _ids(dry, "removed") == {p.name for p in old}
    assert not any(p.exists() for p in old)
    pinned = {r["buildId"]: r["pinned"] for r in result["kept"]}
    assert pinned[real.name] == "the latest run"
    assert pinned[good_large.name] == "the last good build of engine large"
    assert pinned[interrupted.name].startswith("running")
    assert pinned[routed.name] == "named by routes/r/summary.json"
    assert pinned[cell.name] == "named by routes/r/more.json" and pinned[matrix.name].startswith("the matrix of")
    assert result["freedBytes"] == sum(r["bytes"] for r in result["removed"]) > 0


def test_gc_bounds_count_and_size_newest_first(workspace: Path) -> None:
    real = _real_run(workspace)
    now = time.time()
    runs = [_copy(real, _rid("demo", i), now - i * 60, outcome="failed") for i in range(1, 9)]
    result = _gc(workspace, "--keep-runs", "5")
    # the newest 5 of 9 runs are kept (the real one is the latest); the 4 oldest go
    assert _ids(result, "removed") == {p.name for p in runs[4:]}
    size = real.stat().st_size + sum(f.stat().st_size for f in real.rglob("*") if f.is_file())
    result = _gc(workspace, "--max-size-mb", str(2.5 * size / 1e6))
    kept = {r["buildId"] for r in result["kept"]}
    assert real.name in kept and len(kept) <= 3 and _ids(result, "removed") <= {p.name for p in runs[:4]}


def test_history_keeps_the_most_recently_used_configs(workspace: Path) -> None:
    _real_run(workspace)
    path = workspace / ".trtls" / "history.json"
    data = json.loads(path.read_text())
    for i in range(250):
        data[f"cfg{i:03d}"] = {"phases": {}, "stops": [], "lastUsed": 1000.0 + i}
    path.write_text(json.dumps(data))
    assert _gc(workspace)["historyConfigsDropped"] == 51
    kept = json.loads(path.read_text())
    assert len(kept) == 200 and "cfg249" in kept and "cfg000" not in kept


def test_a_build_runs_a_light_gc_with_the_recipe_bounds(workspace: Path) -> None:
    real = _real_run(workspace)
    recipe = workspace / "trtls.toml"
    recipe.write_text(recipe.read_text() + "\n[evidence]\nkeep_runs = 3\nmax_age_days = 365\n")
    now = time.time()
    for i in range(15):
        _copy(real, _rid("demo", i), now - (i + 1) * 3600, outcome="failed")
    build = CliBuild(workspace, "demo")
    s = build.summary()
    assert build.finish() == 0
    left = {p.name for p in (workspace / ".trtls" / "runs").iterdir()}
    assert s["buildId"] in left and real.name in left  # the 3 newest: this build, the real one, the newest copy
    assert len(left) == 3, left


def test_the_evidence_table_is_checked_like_any_recipe_table(workspace: Path) -> None:
    recipe = workspace / "trtls.toml"
    recipe.write_text(recipe.read_text() + "\n[evidence]\nkeep_run = 3\n")
    done = subprocess.run([sys.executable, "-m", "trtls", "check", str(workspace)], capture_output=True, text=True)
    assert done.returncode == 2 and "keep_run" in done.stdout + done.stderr
