"""A build's state keeps what the worker reported as the events the edge validated (issue 28): its finish, its cache
decision and its inventory are `BuildFinished`, `CacheDecisionEvent` and `Artifact`, dumped into summary.json once,
when the record is written, to the same JSON as before (the recorded `large` build's lines, field for field and in
order). The store's amendment of the record is a new `Recorded`: the record a face already read is not edited."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.recorded_build import LARGE_TRACE, frozen_clock, large_events, replayed_build
from trtls.builds.avoidance.lookup import after_build
from trtls.builds.supervisor.build import Build
from trtls.builds.supervisor.history import History
from trtls.builds.supervisor.summary import build_summary
from trtls.core.build_state import Ended, EngineCheck, EngineVerified, Recorded, WorkerGone
from trtls.core.events import Artifact
from trtls.store.use import StoreUse

ENVELOPE = ("v", "type", "t_ns")


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    return frozen_clock(monkeypatch)


def recorded_line(kind: str) -> dict[str, Any]:
    """The recorded worker's `kind` line as it sent it (key order kept), less the protocol's envelope."""
    line = next(json.loads(t) for t in LARGE_TRACE.read_text().splitlines() if json.loads(t)["type"] == kind)
    return {k: v for k, v in line.items() if k not in ENVELOPE}


def test_the_workers_reports_are_kept_as_its_events_and_written_as_before(tmp_path: Path, clock) -> None:
    evs = large_events()
    build = replayed_build(tmp_path, evs)
    finished = next(e for e in evs if e.type == "build_finished")
    state = build.state
    assert state.finished is finished and state.cleanup_status == "not_needed"
    assert state.cache is next(e for e in evs if e.type == "cache_decision")
    assert all(a is e for a, e in zip(state.artifacts, (e for e in evs if e.type == "artifact"), strict=True))

    on_disk = "ab" * 32
    build.fold(EngineVerified((EngineCheck(0, state.artifacts[0].sha256, on_disk, False, "re-read"),), ("differs",)))
    build.fold(Ended(finished.outcome))
    clock["now"] = finished.t_ns
    record = build_summary(build, finished.t_ns, History(tmp_path / "history.json"), model={})

    # the cache decision as the worker sent it; each artifact without its empty fields, the engine's re-read after
    written = {k: v for k, v in recorded_line("artifact").items() if v is not None}
    engine = {**written, "sha256": on_disk, "reportedSha256": written["sha256"], "verified": False, "how": "re-read"}
    assert json.dumps(record["timingCache"]) == json.dumps(recorded_line("cache_decision"))
    assert record["timingCacheMode"] == "not_applicable"
    assert json.dumps(record["artifacts"]) == json.dumps([engine]) and record["engineArtifact"] == engine
    assert list(engine) == ["action", "kind", "path", "size", "sha256", "reportedSha256", "verified", "how"]
    assert record["cleanupStatus"] == "not_needed" and "differs" in record["notes"]
    assert record["engineValidity"]["status"] == "not_checked", "the recorded worker sent none"


def test_a_terminated_workers_cleanup_is_the_supervisors_and_written_as_before(tmp_path: Path, clock) -> None:
    """A worker forced before it decided on its cache: the supervisor's `discarded` in the four fields it always
    wrote, its own inventory rows, its cleanup status."""
    evs = large_events()
    started = next(i for i, e in enumerate(evs) if e.type == "phase_start")
    build = replayed_build(tmp_path, evs[: started + 3])
    build.job["timing_cache"] = {"path": "t.cache"}
    t_end = evs[started + 2].t_ns + 1
    kept = Artifact(type="artifact", t_ns=t_end, action="kept", kind="temp", path="x.tmp", error="busy")
    build.fold(WorkerGone("killed", t_end, t_end + 1, (kept,), "failed", "t.cache"))
    build.fold(Ended("killed"))
    clock["now"] = t_end
    record = build_summary(build, t_end, History(tmp_path / "history.json"), model={})
    assert json.dumps(record["timingCache"]) == json.dumps({
        "decision": "discarded",
        "reason": "the worker was killed before deciding; the cache on disk was not written",
        "path": "t.cache",
        "written_back": False,
    })  # fmt: skip
    assert json.dumps(record["artifacts"]) == json.dumps([
        {"action": "kept", "kind": "temp", "path": "x.tmp", "error": "busy"}
    ])  # fmt: skip
    assert record["cleanupStatus"] == "failed" and record["timingCacheMode"] == "discarded"


def test_the_stores_amendment_is_a_new_record_folded_not_an_edit(tmp_path: Path) -> None:
    """`after_build` adds the store's record to the evidence: summary.json rewritten and the state given a new
    `Recorded`; the record folded before (what a listener may hold) is left as it was."""
    build = Build("e-1", "e", tmp_path / "trtls.toml", {"output": str(tmp_path / "e.engine")}, 5.0, ["w"])
    build.evidence_dir.mkdir(parents=True)
    first = {"buildId": "e-1", "engine": "e", "outcome": "failed", "durationS": 1.0}
    build.fold(Ended("failed"))
    build.fold(Recorded(first))
    use = StoreUse("e", tmp_path / ".trtls", None, tmp_path / "e.engine", "e", not_used="no [store] table")

    after_build(use, build)

    assert first == {"buildId": "e-1", "engine": "e", "outcome": "failed", "durationS": 1.0}, "not edited in place"
    amended = build.state.record
    assert amended is not first and amended is not None and amended["store"]["why"] == "no [store] table"
    assert build.state.summary is not None and build.state.summary.store == amended["store"]
    assert json.loads((build.evidence_dir / "summary.json").read_text()) == amended
