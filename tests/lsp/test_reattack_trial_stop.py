"""A trial's own Stop (trtls.cancelBuild on a trial's build id: its row in the TensorRT Builds view) during a
reduction: the cancelled build is no verdict. The reduction stops there (outcome `cancelled`, the trial recorded as
the one the stop ended) — it once read the cancelled confirm build as "the failure did not reproduce: nothing to
reduce", and a cancelled bisection trial as a pass (the search went on to a larger "minimal" model, and a resume
replayed the cancel as a verdict)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from ..triage.reduce_models import failing_demo
from .raw_stdio import RawServer


def _rows(s: RawServer) -> dict[str, dict[str, Any]]:
    return {r["buildId"]: r for r in s.command("trtls.listBuilds", {})["builds"]}


def test_stopping_a_trial_build_stops_the_reduction_without_a_verdict(tmp_path: Path) -> None:
    ws = failing_demo(tmp_path)
    s = RawServer(cwd=ws)
    try:
        s.initialize(ws)
        uri = (ws / "trtls.toml").as_uri()
        rid = s.command("trtls.reduceEngine", {"uri": uri, "engine": "demo"})["reductionId"]
        stopped = None
        end = time.monotonic() + 300
        while stopped is None and time.monotonic() < end:
            rows = _rows(s)
            if rows[rid]["status"] not in ("starting", "running"):
                break
            for build_id, row in sorted(rows.items()):
                if build_id.startswith(rid + ".t") and row["status"] in ("starting", "running"):
                    cancel = s.command("trtls.cancelBuild", {"buildId": build_id, "source": "ide_stop"})
                    if cancel["accepted"]:
                        stopped = build_id
                        break
            time.sleep(0.02)
        assert stopped is not None, "a trial's build was caught running and stopped"
        while time.monotonic() < end and _rows(s)[rid]["status"] in ("starting", "running"):
            time.sleep(0.1)
    finally:
        s.close()
    record = json.loads((ws / ".trtls" / "reduce" / rid / "result.json").read_text())
    index = int(stopped.rsplit(".t", 1)[1])
    trial = record["trials"][index]
    assert trial["outcome"] == "cancelled", trial
    assert record["outcome"] == "cancelled" and record["stoppedBy"] == "ide_stop", (
        record["outcome"],
        record["causeText"],
    )
    assert record["stoppedDuringTrial"] == index and len(record["trials"]) == index + 1, "no trial after the stop"
    assert "did not reproduce" not in record["causeText"], record["causeText"]
    assert all(v["outcome"] != "cancelled" for v in record["resume"]["verdicts"].values()), "no verdict to replay"
