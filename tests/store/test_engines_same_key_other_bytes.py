"""`trtls engines` says of each build whether the store still holds *its* bytes: two builds of one key can differ in
bytes (a `--rebuild` that was not deterministic replaced the entry), and a rollback restores only the same bytes
(TRT338 otherwise). Keyed by key alone, the listing called both "in the store". A real store seeded by a real build;
the known-good record as such a rebuild leaves it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.store.conftest import copy_store
from tests.store.helpers import run_build, with_store


def test_a_build_whose_key_now_holds_other_bytes_is_not_listed_as_in_the_store(
    seeded: tuple[Path, dict], seed_ws: Path, tmp_path: Path
) -> None:
    with_store(seed_ws, copy_store(seeded, tmp_path))
    done = run_build(seed_ws)
    assert done.returncode == 0, done.stderr
    record_path = seed_ws / ".trtls" / "engines" / "demo.json"
    record = json.loads(record_path.read_text())
    latest = record["builds"][-1]
    earlier = {**latest, "buildId": "demo-20261204-000000-0ld0ld", "sha256": "ab" * 32}  # the same key, other bytes
    record["builds"] = [earlier, *record["builds"]]
    record_path.write_text(json.dumps(record))

    listed = subprocess.run(
        [sys.executable, "-m", "trtls", "engines", "demo", str(seed_ws)], capture_output=True, text=True, timeout=120
    )
    lines = {ln.split()[0]: ln for ln in listed.stdout.strip().splitlines()}
    assert lines[earlier["buildId"]].endswith("(replaced: the store's entry of its key holds another build's bytes)")
    assert "(" not in lines[latest["buildId"]][-12:], lines[latest["buildId"]]
    as_json = subprocess.run(
        [sys.executable, "-m", "trtls", "engines", "demo", str(seed_ws), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    in_store = {r["buildId"]: r["inStore"] for r in json.loads(as_json.stdout)}
    assert in_store[earlier["buildId"]] is False and in_store[latest["buildId"]] is True
