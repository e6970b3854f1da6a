"""A build's state folded from a real recorded event stream, rendered with no supervisor (issue 28): a face that holds
only a `BuildState` draws the tree, the row, the progress line and the outcome that the supervisor's Build draws for
the same events (`core/build_state.py`, `core/build_view.py`)."""

from __future__ import annotations

import pytest

from tests.recorded_build import frozen_clock, large_events, replayed_build
from trtls.core import build_view
from trtls.core.build_state import BuildState, Ended, Forced, Noted, Recorded, Refused, StoppedWaiting, WorkerGone
from trtls.core.display import human_seconds
from trtls.core.events import Artifact, Placed, Queued
from trtls.core.phase_tree import NS
from trtls.core.summary_record import Summary


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    return frozen_clock(monkeypatch)


def test_a_recorded_build_folded_into_a_state_alone_renders_as_the_supervisors_build(tmp_path, clock) -> None:
    evs = large_events()
    cut = next(i for i, e in enumerate(evs) if e.type == "phase_start" and e.phase_id.count(".") >= 4)
    clock["now"] = evs[0].t_ns
    state = BuildState("large-1", "large", tmp_path / ".trtls" / "runs" / "large-1", 5.0, t_start_ns=evs[0].t_ns)
    for ev in evs[: cut + 1]:
        state.fold(ev)
    build = replayed_build(tmp_path, evs[: cut + 1])
    clock["now"] = evs[cut].t_ns + 5 * NS

    snap = build_view.snapshot(state)
    assert snap["running"] and snap["status"] == "starting" and snap["timeLeft"] is None  # no history: no estimate
    assert len(snap["phases"]) > 5 and state.config_hash and state.environment.module == "tensorrt_rtx"
    assert snap == {**build.snapshot(), "timeLeft": None}, "the supervisor's Build adds only the time left"
    line = build_view.progress_message(state)
    assert " › ".join(p.name for p in state.tree.deepest_running_path()) in line and "quiet" in line
    assert build_view.progress_message(build.state, build.time_left) == line + " · no estimate"
    assert build_view.progress_message(state, lambda now: "~1 s left") == line + " · ~1 s left"

    for ev in evs[cut + 1 :]:
        state.fold(ev)
    duration = (evs[-1].t_ns - evs[0].t_ns) / NS
    finished = next(e for e in evs if e.type == "build_finished")
    state.fold(Ended(finished.outcome))
    state.fold(Recorded({"durationS": duration}))
    assert build_view.outcome_message(state) == f"built in {human_seconds(duration)}" == "built in 7 min 45 s"
    assert build_view.description(state).startswith("built · ")
    done = build_view.snapshot(state, lambda now: "never asked once it ended")
    assert (done["outcome"], done["outcomeKind"], done["timeLeft"]) == ("built", "ok", None)
    assert done["evidencePath"] == str(tmp_path / ".trtls" / "runs" / "large-1" / "summary.json")
    assert all(p["status"] == "done" for p in done["phases"]), "every phase of the recorded build finished"


def test_the_supervisors_facts_are_folded_like_the_workers_events(tmp_path, clock) -> None:
    """What the supervisor learns (a refused line, a forced stop, a terminated worker's cleanup) changes the state
    through the same fold, and reads in the outcome sentence."""
    evs = large_events()
    clock["now"] = evs[0].t_ns
    state = BuildState("large-2", "large", tmp_path, 2.0, t_start_ns=evs[0].t_ns)
    started = next(i for i, e in enumerate(evs) if e.type == "phase_start")
    for ev in evs[: started + 3]:
        state.fold(ev)
    state.token.request("ide_stop")
    state.fold(Refused("line 1: not JSON"))
    state.fold(Refused("line 2: not JSON"))
    state.fold(Forced("the builder did not return within 2 s of the cancel: SIGTERM, then SIGKILL"))
    t_end = evs[started + 2].t_ns + NS
    removed = Artifact(type="artifact", t_ns=t_end, action="removed", kind="temp", path="x.tmp")
    state.fold(WorkerGone("forced", t_end, t_end + 1, (removed,), "cleaned", "t.cache"))
    state.fold(Ended("forced"))
    assert state.token.forced and state.token.t_ack_ns == t_end and state.token.t_cleanup_ns == t_end + 1
    assert [p.status for p in state.tree.phases.values()] and all(
        p.status in ("done", "cancelled") for p in state.tree.phases.values()
    ), "the open phases were closed as cancelled"
    assert state.cache is not None and state.cache.decision == "discarded" and state.cache.path == "t.cache"
    assert state.artifacts[-1] is removed and state.cleanup_status == "cleaned"
    assert state.refused_lines == 2 and state.first_refusal == "line 1: not JSON"
    assert len([n for n in state.notes if "refused" in n]) == 1, "the first refusal only, in the notes"
    assert (
        build_view.outcome_message(state)
        == "forced: the builder ignored the cancel from ide_stop for 2 s and was terminated"
    )

    waiting = BuildState("e-3", "e", tmp_path, 5.0)
    waiting.token.request("ctrl_c")
    waiting.fold(StoppedWaiting(42))
    waiting.fold(Noted("cancelled while waiting for another build of e.engine; nothing was built"))
    waiting.fold(Ended("cancelled"))
    assert (waiting.token.t_ack_ns, waiting.token.t_cleanup_ns, waiting.status) == (42, 42, "cancelled")
    assert build_view.outcome_message(waiting) == "cancelled by ctrl_c"


def test_the_evidence_fields_read_typed_and_the_fold_stores_what_the_event_holds(tmp_path, clock) -> None:
    """The record reads as the one `Summary` model (what the store adds to it included: a new `Recorded` the views read
    after the store's listener), and a farm cell's placement is the `Placed` event the edge validated, stored as it
    is (no dump, no second validation per event) and read by field in the node view."""
    state = BuildState("m:c", "large", tmp_path, 5.0, parent_id="m", on_farm_node=True)
    clock["now"] = 10 * NS
    state.fold(Queued(type="queued", t_ns=6 * NS))
    assert build_view.node_view(state) == {"waitingS": 4.0} and state.placement is None
    placed = Placed(type="placed", t_ns=10 * NS, node_id="n1", hostname="h", gpu_ids=["0"], queue_wait_s=4.0,
                    warm=True, cuda_visible_devices="0")  # fmt: skip
    state.fold(placed)
    assert state.placement is placed and state.status == "running"
    node = build_view.node_view(state)
    assert (node["nodeId"], node["gpuIds"], node["warmWorker"], node["cudaVisibleDevices"]) == ("n1", ["0"], True, "0")

    assert state.summary is None
    record = {"buildId": "m:c", "outcome": "built", "durationS": 12, "message": None}
    state.fold(Ended("built"))
    state.fold(Recorded(record))
    assert isinstance(state.summary, Summary) and state.summary.durationS == 12 and state.summary.buildId == "m:c"
    assert build_view.snapshot(state)["rebuiltBecause"] is None
    amended = {**record, "rebuiltBecause": ["models/large.onnx: bytes"]}  # builds.avoidance.lookup.after_build
    state.fold(Recorded(amended))
    assert build_view.snapshot(state)["rebuiltBecause"] == "rebuilt because: models/large.onnx: bytes"
    assert build_view.outcome_message(state) == "built in 12 s" and state.summary.record() == amended
