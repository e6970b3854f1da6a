"""`-o` into trtls's own caches: `trtls check --format json -o <store>/entries/<key>/entry.json` replaced the store
entry's record with the report (both JSON), and the next look at the store quarantined the entry ("its recorded key
does not match its content"); `-o ~/.cache/trtls/farm.json` replaced the farm's state. The engine store a recipe
uses (`[store] path`, `$TRTLS_STORE`) and the per-user cache folder are refused like `.trtls/` now (TRT109,
nothing written). A real build's store (the seed) and real CLI processes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.store.conftest import copy_store
from tests.store.helpers import entries, with_store


def _check(ws: Path, out: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "trtls", "check", str(ws), "--format", "json", "-o", str(out)],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=300,
    )


def test_no_report_is_written_into_the_engine_store(seeded: tuple[Path, dict], seed_ws: Path, tmp_path: Path) -> None:
    store = copy_store(seeded, tmp_path)
    with_store(seed_ws, store)
    (entry,) = entries(store)
    record = entry / "entry.json"
    before = record.read_bytes()
    r = _check(seed_ws, record)
    assert r.returncode == 2 and "TRT109 is inside the engine store" in r.stderr, (r.stdout, r.stderr)
    assert record.read_bytes() == before
    # named by $TRTLS_STORE instead of the recipe: the same
    (seed_ws / "trtls.toml").write_text((seed_ws / "trtls.toml").read_text().split("\n[store]")[0])
    r = _check(seed_ws, record, {"TRTLS_STORE": str(store)})
    assert r.returncode == 2 and "TRT109 is inside the engine store" in r.stderr, r.stderr
    assert record.read_bytes() == before


def test_no_report_is_written_over_the_farms_state(seed_ws: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    state = cache / "trtls" / "farm.json"
    state.parent.mkdir(parents=True)
    state.write_text('{"address": "127.0.0.1:1", "pid": 1, "num_cpus": 1}\n')
    r = _check(seed_ws, state, {"XDG_CACHE_HOME": str(cache)})
    assert r.returncode == 2 and "TRT109 is inside trtls's own cache folder" in r.stderr, (r.stdout, r.stderr)
    assert state.read_text() == '{"address": "127.0.0.1:1", "pid": 1, "num_cpus": 1}\n'
    # a report anywhere else is written as before
    r = _check(seed_ws, tmp_path / "report.json", {"XDG_CACHE_HOME": str(cache)})
    assert r.returncode == 0 and (tmp_path / "report.json").is_file(), r.stderr


def test_no_report_is_written_into_another_projects_records(seed_ws: Path, tmp_path: Path) -> None:
    """`trtls check --format json -o ../other/.trtls/history.json`, run in one project, replaced the other project's
    build history: only the loaded recipe's `.trtls/` and the recipe beside the file were asked. A file under any
    folder's `.trtls/` is refused now (TRT109, nothing written)."""
    other = tmp_path / "other"
    (other / ".trtls" / "runs" / "demo-1").mkdir(parents=True)
    (other / "trtls.toml").write_text("version = 1\n")
    history = other / ".trtls" / "history.json"
    history.write_text('{"demo": []}\n')
    summary = other / ".trtls" / "runs" / "demo-1" / "summary.json"
    summary.write_text('{"buildId": "demo-1"}\n')
    for target in (history, summary):
        r = _check(seed_ws, target)
        assert r.returncode == 2 and "TRT109 is inside trtls's own records (.trtls)" in r.stderr, (r.stdout, r.stderr)
    assert history.read_text() == '{"demo": []}\n' and summary.read_text() == '{"buildId": "demo-1"}\n'
