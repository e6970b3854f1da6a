"""The build core with real TensorRT-RTX builds on the CPU: success, cancel from every source at an
early, middle and late point, forced escalation, a killed worker, no-cancel zones, engine safety."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from trtls.builds.artifacts import sha256_file
from trtls.builds.supervisor.history import History
from trtls.core import build_view
from trtls.core.evidence import missing_seed_fields

from .helpers import cancel_at_phase, leftovers, loaded, process_gone, process_gone_soon, run_build, wait_until


@pytest.fixture(scope="module")
def demo_phase_count(tmp_path_factory: pytest.TempPathFactory, quickstart_models: Path) -> int:
    """Phases a full `demo` build starts (to pick early, middle and late cancel points)."""
    import shutil

    from trtls.cli.main import main

    ws = tmp_path_factory.mktemp("count") / "ws"
    shutil.copytree(quickstart_models.parent, ws, ignore=shutil.ignore_patterns(".trtls", "build"))
    assert main(["build", str(ws), "--engine", "demo"]) == 0
    run = next((ws / ".trtls" / "runs").iterdir())
    return len([p for p in json.loads((run / "summary.json").read_text())["phaseTree"]])


def check_evidence(build, ws: Path) -> dict:
    summary = json.loads((build.evidence_dir / "summary.json").read_text())
    assert summary == json.loads(json.dumps(build.summary, default=str))
    assert missing_seed_fields(summary) == []
    assert (build.evidence_dir / "events.jsonl").stat().st_size > 0
    assert json.loads((build.evidence_dir / "tree.json").read_text()) == summary["phaseTree"]
    assert json.loads((build.evidence_dir / "environment.json").read_text()) == summary["environment"]
    assert not (build.evidence_dir / "running.json").exists()
    assert leftovers(ws) == [], "no temp file may be left"
    assert process_gone_soon(build.pid), "the worker process is gone (it exits on its own after its last event)"
    return summary


async def test_success_path_complete_evidence(workspace: Path) -> None:
    sup, build = await run_build(workspace)
    summary = await build.wait()
    assert summary.outcome == "built", summary.error
    s = check_evidence(build, workspace)
    engine = workspace / "build" / "demo.engine"
    assert engine.is_file() and s["engineArtifact"]["sha256"] == sha256_file(engine)
    assert s["builderModule"] == "tensorrt_rtx" and s["tensorrtVersion"].startswith("1.")
    assert len(s["buildConfigHash"]) == 64 and s["validationStatus"] == "pending"
    assert s["timingCacheMode"] == "not_applicable" and "RTX" in s["timingCache"]["reason"]
    assert s["cancelSource"] is None and s["retryPolicy"] == "not_needed"
    assert all(p["status"] == "done" for p in s["phaseTree"]) and s["phaseTree"][0]["id"] == "0"
    # events are versioned, every phase_start has a matching finish, steps are coalesced (≤ 1 per 50 ms per phase)
    events = [json.loads(line) for line in (build.evidence_dir / "events.jsonl").read_text().splitlines()]
    assert {e["v"] for e in events} == {1}
    starts = [e["phase_id"] for e in events if e["type"] == "phase_start"]
    finishes = [e["phase_id"] for e in events if e["type"] == "phase_finish"]
    assert sorted(starts) == sorted(finishes) and len(starts) == len(s["phaseTree"])
    span = {e["phase_id"]: e["t_ns"] for e in events if e["type"] == "phase_start"}
    span_end = {e["phase_id"]: e["t_ns"] for e in events if e["type"] == "phase_finish"}
    steps: dict[str, int] = {}
    for e in events:
        if e["type"] == "step":
            steps[e["phase_id"]] = steps.get(e["phase_id"], 0) + 1
    for pid, n in steps.items():
        allowed = (span_end[pid] - span[pid]) // 50_000_000 + 1
        assert n <= allowed, (
            f"phase {pid}: {n} step events in {(span_end[pid] - span[pid]) / 1e6:.1f} ms (coalesced to 1 per 50 ms)"
        )
    monitor_steps = sum(p["numSteps"] for p in s["phaseTree"])
    assert sum(steps.values()) < monitor_steps, "coalescing sent fewer step events than the builder reported"
    finishes_with_step = [e for e in events if e["type"] == "phase_finish" and e.get("step") is not None]
    assert finishes_with_step, "a phase finish carries its last step"
    # a second build of the same config gets baselines from history
    sup2, build2 = await run_build(workspace)
    s2 = await build2.wait()
    assert s2.buildConfigHash == s["buildConfigHash"]
    assert any(p["baselineS"] is not None for p in s2.phaseTree), "history gives running phases a usual duration"
    # tree.json can draw a timeline on its own: each phase starts at or after its parent, inside the build
    tree = {p["id"]: p for p in json.loads((build2.evidence_dir / "tree.json").read_text())}
    assert all(0 <= p["startS"] <= s2.durationS for p in tree.values())
    assert all(p["startS"] >= tree[p["parentId"]]["startS"] for p in tree.values() if p["parentId"])
    # history.json dates every successful build of this config (for the report's build time over time)
    dated = History(workspace / ".trtls" / "history.json").builds(s["buildConfigHash"])
    assert [b["buildId"] for b in dated] == [build.id, build2.id]
    assert dated[0]["startedAt"] <= dated[1]["startedAt"] and all(b["durationS"] > 0 for b in dated)


def _point(count: int, where: str) -> int:
    return {"early": 0, "middle": count // 2, "late": count - 2}[where]


@pytest.mark.parametrize("where", ["early", "middle", "late"])
@pytest.mark.parametrize("source", ["api", "ide_stop", "service_shutdown", "event_loop"])
async def test_cancel_in_process_sources(workspace: Path, demo_phase_count: int, source: str, where: str) -> None:
    sup, build = await run_build(workspace)
    waiter = asyncio.ensure_future(build.wait())
    if source == "service_shutdown":
        action = lambda b: asyncio.ensure_future(sup.shutdown())  # noqa: E731
    elif source == "event_loop":
        action = lambda b: waiter.cancel()  # noqa: E731 - cancelling the task awaiting the build
    else:
        action = lambda b: b.cancel(source)  # noqa: E731
    cancel_at_phase(build, _point(demo_phase_count, where), action)
    if source == "event_loop":
        with pytest.raises(asyncio.CancelledError):
            await waiter
        summary = await build.wait()
    else:
        summary = await waiter
    assert summary.outcome == "cancelled", summary.error
    s = check_evidence(build, workspace)
    assert s["cancelSource"] == source and s["forced"] is False
    assert s["cancelLatencyMs"] is not None and s["cancelLatencyMs"] >= 0
    assert s["cleanupLatencyMs"] is not None and s["cleanupStatus"] == "cleaned"
    assert not (workspace / "build" / "demo.engine").exists()
    assert any(p["status"] == "cancelled" for p in s["phaseTree"])
    assert s["retryPolicy"] in ("retry_cold", "retry_with_cache", "investigate")


def _cli(ws: Path, *extra: str, engine: str = "demo", env: dict[str, str] | None = None) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "trtls", "build", str(ws), "--engine", engine, "--json", *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )


def _summary_line(out: str) -> dict:
    last = [json.loads(line) for line in out.splitlines() if line.startswith("{")][-1]
    assert last["type"] == "summary"
    return last["summary"]


@pytest.mark.parametrize("where", ["early", "middle", "late"])
def test_ctrl_c_through_the_cli(workspace: Path, demo_phase_count: int, where: str, tmp_path: Path) -> None:
    target = _point(demo_phase_count, where)
    # the worker's monitor holds inside the phase_start this test answers until the stop comes (fs.hold.held_phase):
    # on a loaded machine the late Ctrl-C landed after `demo` had finished building (CI: exit 0)
    proc = _cli(workspace, env={"TRTLS_TEST_PAUSE": f"phase_start_{target + 1}:{tmp_path}"})
    seen, lines = 0, []
    assert proc.stdout is not None
    for line in proc.stdout:
        lines.append(line)
        if '"type":"phase_start"' in line.replace(" ", ""):
            if seen == target:
                proc.send_signal(signal.SIGINT)
                break
            seen += 1
    out = "".join(lines) + proc.stdout.read()
    assert proc.wait(timeout=120) == 130
    s = _summary_line(out)
    assert s["outcome"] == "cancelled" and s["cancelSource"] == "ctrl_c" and s["cancelLatencyMs"] is not None
    assert not (workspace / "build" / "demo.engine").exists() and leftovers(workspace) == []


# Before the worker starts building, during the ONNX parse, and inside the build. `large` takes ≈ 30 s, so
# every point is inside it on any machine like ours (demo, ≈ 3 s, left a faster machine a race to lose).
@pytest.mark.parametrize("seconds", [0.3, 1.5, 4.0])
def test_ci_timeout_through_the_cli(workspace: Path, seconds: float) -> None:
    proc = _cli(workspace, "--timeout", str(seconds), engine="large")
    out, _ = proc.communicate(timeout=120)
    s = _summary_line(out)
    assert proc.returncode == 124
    assert s["outcome"] == "cancelled" and s["cancelSource"] == "ci_timeout"
    assert not (workspace / "build" / "large.engine").exists() and leftovers(workspace) == []


async def test_a_cancel_before_the_build_starts_is_seen_between_the_worker_steps(workspace: Path) -> None:
    """Cancelled the moment the worker starts: seen after TensorRT's import or after the parse, never waiting for
    the build's first callback, and nothing of the build runs."""
    sup, build = await run_build(workspace, engine="large")
    build.cancel("api")
    s = await asyncio.wait_for(build.wait(), 120)
    assert s.outcome == "cancelled" and s.cancelSource == "api" and s.forced is False
    assert s.phaseTree == []  # TensorRT's build never started
    (note,) = [n for n in s.notes if n.startswith("stopped before TensorRT's build started")]
    assert "TensorRT was being imported" in note or "the ONNX model was being parsed" in note
    check_evidence(build, workspace)
    assert not (workspace / "build" / "large.engine").exists() and leftovers(workspace) == []


async def test_silent_builder_is_forced_after_grace(workspace: Path) -> None:
    # Fault injection: the 3rd phase_start blocks for 60 s without callbacks, like a long silent compile.
    sup, build = await run_build(workspace, faults={"stall": {"at_phase": 3, "seconds": 60}}, grace_s=1.0)
    cancel_at_phase(build, 2, lambda b: b.cancel("api"))
    s = await asyncio.wait_for(build.wait(), 30)
    assert s.outcome == "forced" and s.forced is True and s.cancelSource == "api"
    assert s.retryPolicy == "retry_cold" and s.cleanupStatus == "cleaned"
    check_evidence(build, workspace)
    assert not (workspace / "build" / "demo.engine").exists()
    assert build.exit_code in (-signal.SIGTERM, -signal.SIGKILL, 143)


async def test_worker_killed_mid_build_is_killed_not_cancelled(workspace: Path) -> None:
    sup, build = await run_build(workspace)
    cancel_at_phase(build, 3, lambda b: os.kill(b.pid, signal.SIGKILL))
    s = await build.wait()
    assert s.outcome == "killed" and s.cancelSource is None and "SIGKILL" in s.error
    check_evidence(build, workspace)
    assert not (workspace / "build" / "demo.engine").exists()
    assert all(p["status"] != "running" for p in s.phaseTree)


async def test_previous_engine_survives_cancel_and_failure(workspace: Path) -> None:
    sup, first = await run_build(workspace)
    assert (await first.wait()).outcome == "built"
    engine = workspace / "build" / "demo.engine"
    good = engine.read_bytes()
    # cancelled rebuild
    sup, again = await run_build(workspace)
    cancel_at_phase(again, 4, lambda b: b.cancel("api"))
    s = await again.wait()
    assert s.outcome == "cancelled" and s.previousEngineIntact is True and engine.read_bytes() == good
    # failed rebuild: a profile that contradicts the network (TensorRT refuses it at build time)
    rec = loaded(workspace, {"max = [8, 3, 32, 32]\n\n[engines.large]": "max = [8, 3, 64, 64]\n\n[engines.large]"})
    from trtls.builds.supervisor.supervisor import Supervisor

    failing = Supervisor().start(rec, "demo")
    s = await failing.wait()
    assert s.outcome == "failed" and "Error Code" in s.error
    assert s.previousEngineIntact is True and engine.read_bytes() == good
    assert s.retryPolicy == "rollback" and leftovers(workspace) == []


async def test_disk_full_while_writing_engine_keeps_previous(workspace: Path) -> None:
    sup, first = await run_build(workspace)
    assert (await first.wait()).outcome == "built"
    engine = workspace / "build" / "demo.engine"
    good = engine.read_bytes()
    sup, full = await run_build(workspace, faults={"fsize_limit_bytes": 1 << 20})  # 1 MiB "disk"
    s = await full.wait()
    assert s.outcome == "failed" and "cannot write engine" in s.error
    assert engine.read_bytes() == good and s.previousEngineIntact is True
    assert leftovers(workspace) == []


async def test_cancel_during_commit_is_applied_after_the_engine_is_written(workspace: Path) -> None:
    sup, build = await run_build(workspace, faults={"commit_delay_s": 1.0})
    build.listeners.append(lambda b, ev: b.cancel("api") if ev is not None and ev.type == "builder_returned" else None)
    s = await build.wait()
    assert s.outcome == "built" and s.cancelAfterComplete is True and s.cancelSource == "api"
    assert any("after the engine was complete" in n for n in s.notes)
    assert (workspace / "build" / "demo.engine").is_file() and leftovers(workspace) == []


async def test_two_concurrent_builds_never_share_cancel_state(workspace: Path) -> None:
    from trtls.builds.supervisor.supervisor import Supervisor

    sup = Supervisor()
    rec = loaded(workspace)
    a = sup.start(rec, "demo")
    b = sup.start(rec, "large")
    cancel_at_phase(b, 2, lambda x: x.cancel("api"))
    sb, sa = await b.wait(), await a.wait()
    assert sb.outcome == "cancelled" and sa.outcome == "built"
    assert a.token is not b.token and a.token.source is None
    assert (workspace / "build" / "demo.engine").is_file() and not (workspace / "build" / "large.engine").exists()


async def test_quiet_for_and_elapsed_are_live(workspace: Path) -> None:
    sup, build = await run_build(workspace)
    await wait_until(lambda: len(build.tree.phases) > 3)
    snap = build.snapshot()
    running = [p for p in snap["phases"] if p["status"] == "running"]
    assert running and all(p["elapsedS"] >= 0 and p["quietForS"] is not None for p in running)
    message = build_view.progress_message(build.state, build.time_left)
    assert "›" in message and message.startswith(build.tree.phases["0"].name)
    build.cancel("api")
    await build.wait()


@pytest.mark.parametrize("damage", ["truncated", "flipped", "random"])
async def test_damaged_timing_cache_is_quarantined_and_the_build_runs_cold(workspace: Path, damage: str) -> None:
    from trtls.builds.timing_cache import save_merged

    cache = workspace / "build" / "demo.timing-cache"
    save_merged(cache, b"ptrtd" + bytes(range(256)) * 2, {"written": "by an earlier build"}, lambda a, b: None)
    data = bytearray(cache.read_bytes())
    data = data[:40] if damage == "truncated" else (bytearray(os.urandom(len(data))) if damage == "random" else data)
    if damage == "flipped":
        data[7] ^= 0x80
    cache.write_bytes(bytes(data))
    sup, build = await run_build(workspace)
    s = await build.wait()
    assert s.outcome == "built" and s.timingCacheMode == "quarantined"
    assert "ran cold" in s.timingCache["reason"] and not cache.exists()
    quarantined = Path(s.timingCache["quarantined_to"])
    assert quarantined.read_bytes() == bytes(data), "the suspect file is kept as evidence, byte for byte"


async def test_second_interrupt_forces_without_waiting_for_grace(workspace: Path) -> None:
    # the grace would never expire within this test: only force() can end it
    sup, build = await run_build(workspace, faults={"stall": {"at_phase": 3, "seconds": 60}}, grace_s=600.0)

    def first_then_second(b) -> None:
        b.cancel("ctrl_c")
        b.force()

    cancel_at_phase(build, 2, first_then_second)
    s = await asyncio.wait_for(build.wait(), 60)
    # the user forced the stop: their cancel, stopped at once, not a builder that ignored it (issue 27, item 21)
    assert s.outcome == "cancelled" and s.forced is True and s.cancelSource == "ctrl_c"
    assert leftovers(workspace) == [] and any("the user forced the stop" in n for n in s.notes)


async def test_keep_evidence_quarantines_partial_files_of_a_dead_worker(workspace: Path) -> None:
    rec = loaded(workspace, {"keep_evidence = false": "keep_evidence = true"})
    from trtls.builds.supervisor.supervisor import Supervisor

    build = Supervisor().start(rec, "large")

    def crash_mid_write(b) -> None:
        # what a worker killed while writing its engine leaves: a partial temp file beside the output
        partial = workspace / "build" / f"large.engine.trtls-tmp-{b.id}"
        partial.parent.mkdir(parents=True, exist_ok=True)
        partial.write_bytes(b"half an engine")
        os.kill(b.pid, signal.SIGKILL)

    cancel_at_phase(build, 3, crash_mid_write)
    s = await build.wait()
    assert s.outcome == "killed" and s.cleanupStatus == "quarantined"
    moved = [a for a in s.artifacts if a["action"] == "quarantined"]
    assert len(moved) == 1 and Path(moved[0]["moved_to"]).read_bytes() == b"half an engine"
    assert Path(moved[0]["moved_to"]).parent == workspace / ".trtls" / "quarantine"
    assert leftovers(workspace) == [] and not (workspace / "build" / "large.engine").exists()


@pytest.mark.parametrize("damage", ["history_is_a_list", "trtls_is_a_file"])
async def test_a_damaged_state_folder_never_leaves_a_build_running(workspace: Path, damage: str) -> None:
    if damage == "history_is_a_list":  # history is advice: a damaged file is ignored, the build succeeds
        (workspace / ".trtls").mkdir()
        (workspace / ".trtls" / "history.json").write_text("[]")
    else:  # the evidence folder cannot exist: the build ends failed with the reason, it does not hang
        (workspace / ".trtls").write_text("not a folder")
    sup, build = await run_build(workspace)
    s = await asyncio.wait_for(build.wait(), 120)
    assert not build.running
    if damage == "history_is_a_list":
        assert s.outcome == "built"
    else:
        assert s.outcome == "failed" and s.error.startswith("TRT413 ") and ".trtls" in s.error
        assert process_gone(build.pid)


async def test_a_finished_build_cannot_be_cancelled_after_the_fact(workspace: Path) -> None:
    sup, build = await run_build(workspace)
    s = await build.wait()
    assert s.outcome == "built"
    assert build.cancel("ide_stop") is False and build.token.source is None
    assert build.snapshot()["cancelSource"] is None


async def test_a_force_before_the_worker_exists_is_applied_once_it_does(workspace: Path) -> None:
    """A second Ctrl-C can land before the worker is spawned; it must not be lost (the worker needs ~1 s to
    import TensorRT, so without the pending force this build would end as a cooperative `cancelled`)."""
    sup, build = await run_build(workspace, engine="large", grace_s=600.0)  # only the force can stop it at once
    assert build.worker is None, "start() returns before the worker is spawned"
    assert build.cancel("ctrl_c") is True
    build.force()
    s = await asyncio.wait_for(build.wait(), 60)
    # forced by the user: `cancelled` with forced=True, the stop theirs, not the builder's (issue 27, item 21)
    assert s.outcome == "cancelled" and s.forced is True and s.cancelSource == "ctrl_c", s
    assert any("the user forced the stop" in n for n in s.notes)
    assert process_gone(build.pid) and leftovers(workspace) == []
    assert not (workspace / "build" / "large.engine").exists()


def test_a_control_line_with_an_unknown_source_still_cancels_as_api(workspace: Path) -> None:
    """The protocol's control side (docs/protocol.md) from a foreign supervisor: an unknown source must not be
    ignored (that would let the build run on) nor echoed into the evidence; it is recorded as `api`."""
    from trtls.builds.supervisor.supervisor import worker_job

    job = worker_job(loaded(workspace), "large", "unknown-source-test")
    proc = subprocess.Popen(
        [sys.executable, "-m", "trtls.builds.worker"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(json.dumps(job) + "\n")
    proc.stdin.flush()
    events = []
    for line in proc.stdout:
        events.append(json.loads(line))
        if events[-1]["type"] == "phase_start":
            break
    proc.stdin.write(json.dumps({"v": 1, "type": "cancel", "source": "a-pager-bot"}) + "\n")
    proc.stdin.flush()
    events += [json.loads(line) for line in proc.stdout]
    assert proc.wait(timeout=60) == 3, "exit code 3: cancelled"
    acks = [e for e in events if e["type"] == "cancel_acknowledged"]
    assert [a["source"] for a in acks] == ["api"]
    assert events[-1]["type"] == "build_finished" and events[-1]["outcome"] == "cancelled"
    assert not Path(job["output"]).exists() and leftovers(workspace) == []
