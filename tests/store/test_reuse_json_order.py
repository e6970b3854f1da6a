"""`trtls build --json` prints a reuse's evidence record as it was written, whichever path served it: the fast path
(which holds the dict it wrote) and the full path (which holds the `Summary` model) used to print the same record
with its keys in two orders (the model's field order on the full path). Real `trtls build` processes against a
seeded store; the probe tells the two paths apart (only the full path imports pydantic)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests.store.conftest import copy_store
from tests.store.helpers import probe_env, run_build, with_store


def printed_and_written(ws: Path, probe: Path) -> tuple[list[str], list[str], bool]:
    shutil.rmtree(probe, ignore_errors=True)
    done = run_build(ws, "--json", env=probe_env(probe))
    assert done.returncode == 0, done.stderr
    (line,) = [json.loads(s) for s in done.stdout.splitlines() if s.startswith("{") and '"summary"' in s]
    printed = line["summary"]
    written = json.loads((ws / ".trtls" / "runs" / printed["buildId"] / "summary.json").read_text())
    full_path = any(p.name.startswith("pydantic-") for p in probe.iterdir())
    return list(printed), list(written), full_path


def test_a_reuse_prints_its_record_in_the_order_written_on_the_fast_and_the_full_path(
    seeded: tuple[Path, dict], seed_ws: Path, tmp_path: Path
) -> None:
    store = copy_store(seeded, tmp_path)
    with_store(seed_ws, store)
    probe = tmp_path / "probe"
    full_printed, full_written, full = printed_and_written(seed_ws, probe)  # no memo yet: the full path
    fast_printed, fast_written, fast_full = printed_and_written(seed_ws, probe)  # unchanged: the fast path
    assert full and not fast_full, "the two runs did not take the two paths"
    assert full_printed == full_written
    assert fast_printed == fast_written
    assert full_printed == fast_printed
