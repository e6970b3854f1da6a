"""Stopping remote builds on a real Ray cluster: a cancel from each source mid-build; a node killed mid-build; the
driver (the CLI) killed mid-build leaves no build running on the cluster."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.farm.conftest import LABEL, engine_table, farm_recipe, kill_driver_mid_build
from trtls.builds.farm.submit import prepare
from trtls.builds.supervisor.matrix import plan
from trtls.builds.supervisor.orphans import process_alive
from trtls.builds.supervisor.supervisor import Supervisor
from trtls.core import build_view
from trtls.core.recipe import load_recipe

PREVIOUS = b"vtrt previous good engine"


def alive_node_workers() -> list:
    """Node-worker actors alive on the test cluster (named by address: other Ray instances may run on this machine):
    a GPU cell's own NodeWorker, or a node's shared NodeHost (it ends a few seconds after its last cell)."""
    from tests.farm.test_node_host import actors

    return [a for cls in ("NodeWorker", "NodeHost") for a in actors(cls)]


def no_placement_group_left() -> bool:
    from tests.farm.test_node_host import no_placement_group_left as check

    return check()


async def eventually(check, what: str, bound_s: float = 90.0) -> None:
    """A bound for something that must happen, not a speed assertion: the cluster may be slow under load."""
    deadline = time.monotonic() + bound_s
    while not check():
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.25)


async def start_large(tmp_path: Path, address: str, label: str):
    path = farm_recipe(tmp_path, address, engine_table("large", "large", f'{{ "{LABEL}" = "{label}" }}'))
    (tmp_path / "build").mkdir(exist_ok=True)
    (tmp_path / "build" / "large.engine").write_bytes(PREVIOUS)
    loaded = load_recipe(path)
    planned = plan(loaded, ["large"], False, {})
    specs = await prepare(loaded, planned)
    assert isinstance(specs, dict), specs
    build = Supervisor().start(loaded, "large", remote=specs["large"])
    first_phase = asyncio.Event()
    build.listeners.append(lambda b, ev: first_phase.set() if ev is not None and ev.type == "phase_start" else None)
    await asyncio.wait_for(first_phase.wait(), 300)
    return build


def assert_clean_stop(build, tmp_path: Path) -> None:
    s = build.summary
    output = tmp_path / "build" / "large.engine"
    assert output.read_bytes() == PREVIOUS and s["previousEngineIntact"] is True
    assert not list(output.parent.glob("*.trtls-tmp-*"))
    assert s["engineArtifact"] is None
    assert s["node"]["nodeId"] and s["node"]["labels"][LABEL]
    assert (build.evidence_dir / "summary.json").is_file()


@pytest.mark.parametrize("source", ["ide_stop", "api", "ci_timeout", "service_shutdown", "event_loop"])
async def test_cancel_from_each_source_mid_build(ray_cluster, tmp_path: Path, source: str) -> None:
    build = await start_large(tmp_path, ray_cluster.address, "SM89")
    assert build.running and build.state.placement.labels[LABEL] == "SM89"
    if source == "event_loop":
        waiter = asyncio.ensure_future(build.wait())
        await asyncio.sleep(0)
        waiter.cancel()  # the awaiting task is cancelled: the build is stopped with source event_loop
    else:
        assert build.cancel(source)
    summary = await build.wait()
    assert summary.outcome == "cancelled", (summary.error, summary.stderrTail)
    assert summary.cancelSource == source and summary.forced is False
    assert summary.cancelLatencyMs is not None
    assert_clean_stop(build, tmp_path)
    await eventually(lambda: not alive_node_workers(), "the cell's actor was not released")
    await eventually(no_placement_group_left, "the cancelled cell's placement group was left")
    assert not process_alive(build.pid)  # the remote worker (on this machine) is gone


async def test_forced_stop_kills_the_remote_group_then_the_actor(ray_cluster, tmp_path: Path) -> None:
    """The builder stalls past the grace: SIGTERM/SIGKILL reach the remote worker's process group; the node's shared
    host ends the cell (its group, its bundle) and, with no cell left, ends itself."""
    path = farm_recipe(
        tmp_path,
        ray_cluster.address,
        engine_table("large", "large", f'{{ "{LABEL}" = "SM120" }}').replace(
            "cancel_grace_s = 30", "cancel_grace_s = 1"
        ),
    )
    loaded = load_recipe(path)
    planned = plan(loaded, ["large"], False, {})
    specs = await prepare(loaded, planned)
    build = Supervisor().start(
        loaded, "large", remote=specs["large"], faults={"stall": {"at_phase": 2, "seconds": 600}}
    )
    stalled = asyncio.Event()
    build.listeners.append(lambda b, ev: stalled.set() if ev is not None and ev.type == "phase_start" else None)
    await asyncio.wait_for(stalled.wait(), 300)
    await asyncio.sleep(0.5)
    build.cancel("ide_stop")
    summary = await build.wait()
    assert summary.outcome == "forced" and summary.forced is True, summary.error
    assert any("SIGTERM" in n for n in summary.notes)
    await eventually(lambda: not process_alive(build.pid), "the remote worker survived SIGKILL")
    await eventually(lambda: not alive_node_workers(), "the actor survived the forced stop")
    await eventually(no_placement_group_left, "the forced cell's placement group was left")


async def test_node_killed_mid_build_ends_killed_with_evidence(ray_cluster, tmp_path: Path) -> None:
    doomed = ray_cluster.add_node(num_cpus=1, labels={LABEL: "doomed"})
    ray_cluster.wait_for_nodes()
    build = await start_large(tmp_path, ray_cluster.address, "doomed")
    node_id = build.state.placement.node_id
    ray_cluster.remove_node(doomed, allow_graceful=False)
    summary = await build.wait()
    assert summary.outcome == "killed", summary
    assert summary.error.startswith("node lost") and node_id[:12] in summary.error
    assert build.outcome_message().startswith("killed: node lost")
    assert summary.node["nodeId"] == node_id and summary.node["labels"][LABEL] == "doomed"
    assert summary.retryPolicy  # the evidence is complete: advice, tree, cleanup
    assert_clean_stop(build, tmp_path)
    await eventually(lambda: not process_alive(build.pid), "the worker of the lost node is still running")


async def test_a_worker_killed_on_a_live_node_ends_with_its_signal_not_a_node_loss(ray_cluster, tmp_path) -> None:
    """The other side of the node-loss rule: an unexplained SIGKILL (the OOM killer, a user) is relayed only after
    the node's actor answered; the node is alive, so the build ends `killed` with the signal — never "node lost"."""
    build = await start_large(tmp_path, ray_cluster.address, "SM89")
    os.kill(build.pid, signal.SIGKILL)  # the remote worker runs on this machine: the cluster is local
    summary = await build.wait()
    assert "node lost" not in (summary.error or "") and "died" not in (summary.error or ""), summary.error
    assert "SIGKILL" in (summary.error or ""), summary.error
    assert summary.outcome == "killed" and summary.cancelSource is None
    assert_clean_stop(build, tmp_path)
    await eventually(lambda: not alive_node_workers(), "the cell's actor was not released")


async def test_killed_driver_leaves_no_build_running(ray_cluster, tmp_path: Path) -> None:
    path = farm_recipe(tmp_path, ray_cluster.address, engine_table("large", "large", f'{{ "{LABEL}" = "SM89" }}'))

    def building(pid: int) -> None:
        assert process_alive(pid), "the cell's worker is not running"

    worker_pid = kill_driver_mid_build(["build", str(path)], before=building)
    await eventually(lambda: not process_alive(worker_pid), "the remote worker outlived its driver")
    await eventually(lambda: not alive_node_workers(), "the cell's actor outlived its driver")
    await eventually(no_placement_group_left, "the dead driver's placement group was left")
    assert not (tmp_path / "build" / "large.engine").exists()


async def test_ctrl_c_on_the_cli_stops_the_remote_build(ray_cluster, tmp_path: Path) -> None:
    """The sixth source: a real SIGINT to `trtls build` (the terminal's Ctrl-C) while a cell builds on a node."""
    path = farm_recipe(tmp_path, ray_cluster.address, engine_table("large", "large", f'{{ "{LABEL}" = "SM120" }}'))
    cli = subprocess.Popen(
        [sys.executable, "-m", "trtls.cli.main", "build", str(path), "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert cli.stdout is not None
    try:
        for raw in cli.stdout:
            if json.loads(raw).get("type") == "phase_start":
                break
        cli.send_signal(signal.SIGINT)
        records = [json.loads(raw) for raw in cli.stdout]
        code = cli.wait(timeout=300)
    finally:
        if cli.poll() is None:
            cli.kill()
    assert code == 130
    summary = next(r["summary"] for r in records if r.get("type") == "cell_summary")
    assert summary["outcome"] == "cancelled" and summary["cancelSource"] == "ctrl_c", summary["error"]
    assert summary["node"]["labels"][LABEL] == "SM120"
    parent = next(r["summary"] for r in records if r.get("type") == "summary")
    assert parent["outcome"] == "cancelled" and parent["cancelSource"] == "ctrl_c"
    assert not (tmp_path / "build" / "large.engine").exists()


async def test_queue_wait_is_shown_bounded_and_cancellable(ray_cluster, tmp_path: Path) -> None:
    """Node SM89 has one slot: while `large` holds it, a second cell waits ("waiting for a node"); one waiting cell
    is cancelled in the queue, another gives up after queue_timeout_s (TRT231). Nothing of theirs ever ran."""
    holder = await start_large(tmp_path / "a", ray_cluster.address, "SM89")
    try:
        path = farm_recipe(
            tmp_path / "b", ray_cluster.address, engine_table("demo", "demo", f'{{ "{LABEL}" = "SM89" }}')
        )
        loaded = load_recipe(path)
        specs = await prepare(loaded, plan(loaded, ["demo"], False, {}))
        assert isinstance(specs, dict)
        sup = Supervisor()
        waiting = sup.start(loaded, "demo", remote=specs["demo"])
        await eventually(lambda: waiting.status == "waiting for a node", "the cell never showed its queue wait")
        await asyncio.sleep(1.0)
        assert (
            build_view.progress_message(waiting.state).startswith("waiting for a node")
            and waiting.node_view()["waitingS"] >= 1.0
        )
        assert waiting.cancel("ide_stop")
        cancelled = await waiting.wait()
        assert cancelled.outcome == "cancelled" and cancelled.cancelSource == "ide_stop"
        assert any("while waiting for a node" in n for n in cancelled.notes) and cancelled.workerPid is None

        short = farm_recipe(
            tmp_path / "c", ray_cluster.address, engine_table("demo", "demo", f'{{ "{LABEL}" = "SM89" }}')
        )
        short.write_text(short.read_text().replace("queue_timeout_s = 600", "queue_timeout_s = 2"))
        loaded = load_recipe(short)
        specs = await prepare(loaded, plan(loaded, ["demo"], False, {}))
        timed_out = await sup.start(loaded, "demo", remote=specs["demo"]).wait()
        assert timed_out.outcome == "failed" and timed_out.error.startswith("TRT231"), timed_out.error
        assert timed_out.node == {} and timed_out.workerPid is None  # it never reached a node
        from trtls.builds.supervisor.outcome_findings import build_findings

        assert build_findings(timed_out)[0].code == "TRT231"
    finally:
        holder.cancel("api")
        await holder.wait()
    # the waiting cells' bundles were withdrawn (cancelled in the queue, timed out), the holder's freed
    await eventually(no_placement_group_left, "a placement group of a queued or stopped cell was left")
