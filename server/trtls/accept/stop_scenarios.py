"""Acceptance scenarios that stop a build: every cancel source, a builder that ignores the cancel, a worker or
language server that dies mid-build."""

from __future__ import annotations

import asyncio
import os
import signal

from trtls.accept.cli_run import cli_build, cli_observation
from trtls.accept.criteria import Observation
from trtls.accept.lsp_client import LspClient
from trtls.accept.runner import (  # the harness
    Context,
    Recorder,
    _history,
    in_process_stop,
    workspace,
)
from trtls.builds.supervisor.build import Build
from trtls.builds.supervisor.supervisor import Supervisor
from trtls.core.summary_record import SUMMARY_NAME, SummaryProblem, read_summary
from trtls.fs import signal_child
from trtls.fs.kill import signal_descendant


def sc_api_cancel(ctx: Context) -> Observation:
    return in_process_stop(ctx, "api_cancel", "api")


def sc_event_loop(ctx: Context) -> Observation:
    return in_process_stop(ctx, "event_loop", "event_loop", action=lambda b, sup, waiter: waiter.cancel())


def _sigkill_worker(b: Build, sup: Supervisor, waiter: asyncio.Future) -> None:
    pid = b.state.pid
    if pid is None:  # never a signal to pid 0: that is this process group
        raise RuntimeError("the worker has no pid yet")
    if not signal_descendant(pid, signal.SIGKILL, os.getpid()):  # the worker this process started, nothing else
        raise RuntimeError(f"pid {pid} is not a worker this process started (or it is already gone)")


def sc_worker_sigkill(ctx: Context) -> Observation:
    return in_process_stop(ctx, "worker_sigkill", None, action=_sigkill_worker, expect={"killed": True})


def sc_silent_builder(ctx: Context) -> Observation:
    # The k-th phase_start blocks for 60 s (no callbacks): the cancel sent when it starts is never seen.
    k = ctx.middle
    return in_process_stop(
        ctx,
        "silent_builder",
        "api",
        faults={"stall": {"at_phase": k, "seconds": 60}},
        grace=1.0,
        at_phase=k - 1,
        expect={"forced": True},
    )


def sc_ctrl_c(ctx: Context) -> Observation:
    ws = workspace(ctx, "ctrl_c")
    rec = Recorder(ctx, "ctrl_c", ws, {"cancel_source": "ctrl_c", "exit_code": 130})
    rec.before()
    cli_observation(rec, cli_build(ctx, ws, signal_at_phase=ctx.middle, sig=signal.SIGINT))
    rec.retry()
    return rec.finish()


def sc_ide_stop(ctx: Context) -> Observation:
    rec = asyncio.run(_lsp_scenario(ctx, "ide_stop", kill_server=False))
    rec.retry()  # outside the client's event loop: a retry runs its own
    return rec.finish()


def sc_server_killed(ctx: Context) -> Observation:
    rec = asyncio.run(_lsp_scenario(ctx, "server_killed", kill_server=True))
    rec.retry()
    return rec.finish()


async def _lsp_scenario(ctx: Context, name: str, kill_server: bool) -> Recorder:
    ws = workspace(ctx, name)
    expect = {"killed": True, "user_told": True} if kill_server else {"cancel_source": "ide_stop"}
    rec = Recorder(ctx, name, ws, expect)
    rec.before()
    hist = _history(ws)
    client = LspClient()
    await client.start(ws, ctx.scratch / f"{name}-server.log", within=ctx.scratch)
    pids = [client.pid or 0]
    second: LspClient | None = None
    try:
        await client.initialize(ws)
        build_id, worker_pid = await client.build_past_phase(ws, ctx.engine, ctx.middle, timeout=300)
        pids.append(worker_pid or 0)
        if kill_server:
            signal_child(client.proc, signal.SIGKILL)  # the server this scenario started
            await client.close()
            second = LspClient()
            await second.start(ws, ctx.scratch / f"{name}-server2.log", within=ctx.scratch)
            pids.append(second.pid or 0)
            await second.initialize(ws)
            told = await second.wait_for(
                lambda: [m for m in second.of("window/showMessage") if build_id in m.get("message", "")], timeout=120
            )
            rec.obs.extra["user_told"] = bool(told)
            rec.obs.extra["note"] = told[0]["message"]
        else:
            token = next(
                r["params"]["token"]
                for r in client.server_requests
                if r.get("method") == "window/workDoneProgress/create"
            )
            client.notify("window/workDoneProgress/cancel", {"token": token})
            await client.wait_for(
                lambda: any(
                    p.get("token") == token and (p.get("value") or {}).get("kind") == "end"
                    for p in client.of("$/progress")
                ),
                timeout=300,
            )
        found = read_summary(ws / ".trtls" / "runs" / build_id / SUMMARY_NAME)
        if isinstance(found, SummaryProblem):
            raise RuntimeError(str(found))  # cli.accept reports it as the scenario's error, with the record's path
        live = [t.get("phases") or [] for t in client.build_trees(build_id)]
        had = bool((hist.get(found.buildConfigHash or ctx.baseline.buildConfigHash) or {}).get("phases"))
    finally:
        if second is not None:
            await second.close()
        await client.close()
    rec.after(found, {"live": live, "history_had_baselines": had}, pids=pids)
    return rec
