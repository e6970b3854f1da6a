"""Every evidence record kind carries every runbook field (issue 28 item 10): a consumer parsing `summary.json` meets
one schema. Real runs of the quickstart's `demo`, each record read from disk: built (the seed), reused from the store,
rolled back, cancelled (Ctrl-C), killed (its worker SIGKILLed), recovered (its CLI SIGKILLed, the record completed
by orphan recovery) and failed (a plugin library that is none). Each also loads as core.summary_record's `Summary`
(the model every reader uses) and round-trips through it unchanged. The worker's test hook holds each stopped build
before TensorRT's build starts, so no test waits on time.

Before: a reused or rolled-back record lacked `timingCacheMode`, `cleanupStatus`, `retryPolicy`, `cancelSource`,
`gpuSku`, `language` and `cancelLatencyMs`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.builds.cli_procs import CliBuild, pause_env, wait_for_file
from tests.store.conftest import copy_store
from tests.store.helpers import run_build, summaries, with_store
from trtls.builds.supervisor.orphans import process_alive, recover_orphans
from trtls.core.evidence import RUNBOOK_FIELDS, SEED_FIELDS, record_problems
from trtls.core.summary_record import Summary, read_summary, summary_of
from trtls.core.vocabulary import NOT_APPLICABLE


def _record(ws: Path, build_id: str) -> dict[str, Any]:
    return json.loads((ws / ".trtls" / "runs" / build_id / "summary.json").read_text())


def _held_before_build(ws: Path, pause: Path) -> tuple[CliBuild, str, int]:
    """A `--rebuild` CLI build whose worker waits at `before_build`, once its supervisor runs it: (the CLI, the build
    id, the worker's pid). A rebuild of an unchanged recipe gets its job before the recipe is checked
    (builds/supervisor/speculation.py): its worker may wait there before the supervisor has adopted it, when a stop
    would end a build that never began (nothing recorded, as for any Ctrl-C during the check); so the build's own
    events file, written once the supervisor runs it, is waited for too."""
    cli = CliBuild(ws, "demo", "--rebuild", env=pause_env(pause, "before_build"))
    marker = wait_for_file(pause, ".before_build")
    build_id, worker = marker.name.removesuffix(".before_build"), int(marker.read_text())
    wait_for_file(ws / ".trtls" / "runs" / build_id, "events.jsonl")
    marker.rename(marker.with_suffix(".seen"))  # the next build's marker is the only one
    return cli, build_id, worker


def _wait_gone(pid: int) -> None:
    deadline = time.monotonic() + 120  # the worker is not this test's child: its end is seen in /proc
    while process_alive(pid):
        assert time.monotonic() < deadline, f"worker {pid} still alive"
        time.sleep(0.02)


def test_every_record_kind_carries_every_runbook_field(seeded: tuple[Path, dict], seed_ws: Path, tmp_path: Path):
    store = copy_store(seeded, tmp_path)
    with_store(seed_ws, store)
    records: dict[str, dict[str, Any]] = {}
    records["built"] = json.loads((seeded[0].parent / "ws" / ".trtls" / "runs" / seeded[1]["buildId"] /
                                   "summary.json").read_text())  # fmt: skip

    reused = run_build(seed_ws)
    assert reused.returncode == 0, reused.stderr
    records["reused"] = summaries(seed_ws)[-1]
    back = subprocess.run(
        [sys.executable, "-m", "trtls", "rollback", "demo", str(seed_ws), "--to", seeded[1]["buildId"]],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert back.returncode == 0, back.stderr
    records["rolled_back"] = summaries(seed_ws)[-1]

    pause = tmp_path / "pause"
    cli, build_id, _ = _held_before_build(seed_ws, pause)
    cli.interrupt()  # Ctrl-C: the held worker sees the cancel and ends
    cli.finish()
    records["cancelled"] = _record(seed_ws, build_id)

    cli, build_id, worker = _held_before_build(seed_ws, pause)
    os.killpg(worker, signal.SIGKILL)  # the worker dies; its CLI lives and writes the record
    cli.finish()
    records["killed"] = _record(seed_ws, build_id)

    cli, build_id, worker = _held_before_build(seed_ws, pause)
    cli.proc.send_signal(signal.SIGKILL)  # the CLI dies; the worker sees its stdin close and ends
    cli.proc.wait()
    _wait_gone(worker)
    assert [r.build_id for r in recover_orphans(seed_ws / ".trtls")] == [build_id]
    records["recovered"] = _record(seed_ws, build_id)

    recipe = seed_ws / "trtls.toml"  # a library that registers no plugin: the worker refuses it (TRT149)
    recipe.write_text(recipe.read_text() + '[engines.demo.plugins]\nlibraries = ["/lib/x86_64-linux-gnu/libm.so.6"]\n')
    before = {r["buildId"] for r in summaries(seed_ws)}
    failed = run_build(seed_ws)
    assert failed.returncode != 0, failed.stdout
    new = [r for r in summaries(seed_ws) if r["buildId"] not in before]
    assert len(new) == 1, ([r["outcome"] for r in new], failed.stderr)
    records["failed"] = new[0]

    outcomes = {kind: r["outcome"] for kind, r in records.items()}
    assert outcomes == {"built": "built", "reused": "reused", "rolled_back": "rolled_back", "cancelled": "cancelled",
                        "killed": "killed", "recovered": "killed", "failed": "failed"}, outcomes  # fmt: skip
    assert "supervisor" in records["recovered"] and "supervisor" not in records["killed"]
    for kind, record in records.items():
        assert set(RUNBOOK_FIELDS) <= set(record), (kind, sorted(set(RUNBOOK_FIELDS) - set(record)))
        assert record_problems(record) == [], (kind, record_problems(record))
        model = summary_of(record, kind)  # the model every reader uses (core.summary_record)
        assert isinstance(model, Summary), str(model)
        assert model.missing_runbook_fields() == [] and model.record() == record, kind
        assert model.outcome == record["outcome"] and model.buildId == record["buildId"]
    on_disk = read_summary(seed_ws / ".trtls" / "runs" / records["failed"]["buildId"] / "summary.json")
    assert isinstance(on_disk, Summary) and on_disk.failure is not None, on_disk
    assert len({frozenset(set(r) & set(RUNBOOK_FIELDS)) for r in records.values()}) == 1
    assert set(SEED_FIELDS) <= set(RUNBOOK_FIELDS)

    built = records["built"]
    for kind in ("reused", "rolled_back"):  # the engine's builder from its producing build; no builder ran here
        r = records[kind]
        assert r["tensorrtVersion"] == built["tensorrtVersion"] and r["builderModule"] == built["builderModule"]
        assert r["buildConfigHash"] == built["buildConfigHash"]
        for field in ("language", "gpuSku", "timingCacheMode", "cleanupStatus"):
            assert r[field] == NOT_APPLICABLE, (kind, field, r[field])
        assert r["cancelSource"] is None and r["retryPolicy"] == "not_needed" and r["validationStatus"] == "pending"
    assert records["cancelled"]["cancelSource"] == "ctrl_c"
    assert all(records[k]["gpuSku"] != NOT_APPLICABLE for k in ("built", "cancelled", "killed", "recovered"))
