"""Cancel latency per source, measured from the evidence (`summary.json`) of real `demo` builds stopped
at random points.

Sources: api, service_shutdown, event_loop (in-process Supervisor); ide_stop (Stop on the progress
token, through the real language server over stdio); ctrl_c (SIGINT to a `trtls build` subprocess);
ci_timeout (`trtls build --timeout T`). Per build, from summary.json:
  cancelLatencyMs          request → builder returned (includes the wait for the next callback)
  cancelReturnAfterSeenMs  builder return − the callback that saw the cancel     target p99 ≤ 5 ms
  cleanupLatencyMs         builder return → cleanup done                          target p99 ≤ 100 ms
Forced kill: fault {"stall": {"at_phase": 3, "seconds": 60}}, grace 1.0 s, cancel inside the stall;
request → worker gone (cancelLatencyMs of a forced build; cross-checked by polling the pid).
                                                                                  target ≤ grace + 200 ms
Usage: python benchmarks/bench_cancel_latency.py [--n 20] [--n-cli 10] [--n-forced 10] [--json out.json]
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import dist, emit, every_build_builds, figure, fmt_dist, parser, workspace
from trtls.builds.supervisor.supervisor import Supervisor
from trtls.core.recipe import load_recipe

GRACE_S = 1.0
rng = random.Random(20261129)


def _started_future(build) -> asyncio.Future:
    fut = asyncio.get_running_loop().create_future()

    def listener(b, ev) -> None:
        if ev is not None and ev.type == "phase_start" and not fut.done():
            fut.set_result(time.monotonic())

    build.listeners.append(listener)
    return fut


async def calibrate(ws: Path) -> dict[str, float]:
    """One full build: seconds from start to the first phase, and of the builder's own run."""
    t0 = time.monotonic()
    build = Supervisor().start(load_recipe(ws / "trtls.toml"), "demo")
    first = _started_future(build)
    s = await build.wait()
    assert s.outcome == "built", s.error
    ev = {
        json.loads(x)["type"]: json.loads(x)["t_ns"]
        for x in (build.evidence_dir / "events.jsonl").read_text().splitlines()
    }
    builder_s = (ev["builder_returned"] - ev["build_started"]) / 1e9
    return {"to_first_phase_s": first.result() - t0, "builder_s": builder_s}


async def in_process(ws: Path, source: str, window_s: float) -> dict[str, Any]:
    sup = Supervisor()
    build = sup.start(load_recipe(ws / "trtls.toml"), "demo")
    waiter = asyncio.ensure_future(build.wait())
    await _started_future(build)
    await asyncio.sleep(rng.uniform(0, window_s))
    if source == "service_shutdown":
        asyncio.ensure_future(sup.shutdown())
    elif source == "event_loop":
        waiter.cancel()  # cancelling the task awaiting the build
    else:
        build.cancel(source)
    try:
        await waiter
    except asyncio.CancelledError:
        pass
    return (await build.wait()).record()  # the record as JSON: the runs are collected and written as JSON


async def ide_stop_runs(ws: Path, n: int, window_s: float) -> list[dict[str, Any]]:
    from lsprotocol import types as lsp

    from _lsp import execute, open_recipe, start_server, until

    client, trees = await start_server()
    out = []
    try:
        uri = open_recipe(client, ws)
        for _ in range(n):
            known = set(client.progress_reports)
            res = await execute(client, "trtls.buildEngine", {"uri": uri, "engine": "demo"})
            bid = res["buildId"]
            await until(lambda known=known: set(client.progress_reports) - known)
            token = next(iter(set(client.progress_reports) - known))
            await until(lambda bid=bid: any(t.get("buildId") == bid and t.get("phases") for t in trees))
            await asyncio.sleep(rng.uniform(0, window_s))
            client.window_work_done_progress_cancel(lsp.WorkDoneProgressCancelParams(token=token))
            await until(
                lambda token=token: any(
                    isinstance(r, lsp.WorkDoneProgressEnd) for r in client.progress_reports.get(token, [])
                )
            )
            out.append((await execute(client, "trtls.showEvidence", {"buildId": bid}))["summary"])
    finally:
        await client.shutdown_session()
    return out


async def cli_run(ws: Path, source: str, window_s: float, to_first_s: float) -> dict[str, Any]:
    extra = ["--timeout", f"{to_first_s + rng.uniform(0, window_s):.3f}"] if source == "ci_timeout" else []
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "trtls",
        "build",
        str(ws),
        "--engine",
        "demo",
        "--json",
        *extra,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        limit=1 << 24,
    )
    lines: list[bytes] = []
    sent = False
    assert proc.stdout is not None
    while line := await proc.stdout.readline():
        lines.append(line)
        if source == "ctrl_c" and not sent and b'"phase_start"' in line:
            sent = True
            delay = rng.uniform(0, window_s)
            asyncio.get_running_loop().call_later(
                delay, lambda: proc.returncode is None and proc.send_signal(signal.SIGINT)
            )
    await proc.wait()
    last = [json.loads(x) for x in lines if x.startswith(b"{")][-1]
    return last["summary"]


async def forced_run(ws: Path) -> dict[str, Any]:
    sup = Supervisor()
    faults = {"stall": {"at_phase": 3, "seconds": 60}}
    build = sup.start(load_recipe(ws / "trtls.toml"), "demo", faults=faults, grace_s=GRACE_S)
    third = asyncio.get_running_loop().create_future()
    seen = {"n": 0}

    def listener(b, ev) -> None:
        if ev is not None and ev.type == "phase_start":
            seen["n"] += 1
            if seen["n"] == 3 and not third.done():
                third.set_result(None)

    build.listeners.append(listener)
    await third
    await asyncio.sleep(rng.uniform(0, 0.5))  # somewhere inside the silent stretch
    pid = build.pid
    build.cancel("api")
    t_req = build.token.t_request_ns

    gone_ns = None
    while gone_ns is None:  # independent check: poll the worker's pid until it is gone or a zombie
        try:
            os.kill(pid, 0)
            with open(f"/proc/{pid}/stat") as fh:
                if fh.read().rsplit(")", 1)[-1].split()[0] == "Z":
                    gone_ns = time.monotonic_ns()
        except (ProcessLookupError, FileNotFoundError):
            gone_ns = time.monotonic_ns()
        if gone_ns is None:
            await asyncio.sleep(0.002)
    s = (await build.wait()).record()  # as JSON, with this benchmark's own measure added
    s["_polledGoneMs"] = (gone_ns - t_req) / 1e6
    return s


def collect(summaries: list[dict[str, Any]]) -> dict[str, Any]:
    coop = [s for s in summaries if s["outcome"] == "cancelled"]
    return {
        "runs": len(summaries),
        "cancelled": len(coop),
        "built_before_cancel": sum(1 for s in summaries if s["outcome"] == "built"),
        "other": sorted({s["outcome"] for s in summaries} - {"cancelled", "built"}),
        "cancelLatencyMs": [s["cancelLatencyMs"] for s in coop if s.get("cancelLatencyMs") is not None],
        "cancelReturnAfterSeenMs": [
            s["cancelReturnAfterSeenMs"] for s in coop if s.get("cancelReturnAfterSeenMs") is not None
        ],
        "cleanupLatencyMs": [s["cleanupLatencyMs"] for s in coop if s.get("cleanupLatencyMs") is not None],
        "cleanupStatus": sorted({s.get("cleanupStatus") for s in coop}),
    }


async def run(n: int, n_cli: int, n_forced: int) -> dict[str, Any]:
    ws = workspace(Path(tempfile.mkdtemp(prefix="trtls-bench-cancel-")))
    cal = await calibrate(ws)
    window = cal["builder_s"] * 0.95
    print(
        f"  calibration: first phase after {cal['to_first_phase_s']:.2f} s, builder runs {cal['builder_s']:.2f} s; "
        f"cancels at uniform random points in the first {window:.2f} s after the first phase",
        flush=True,
    )
    per: dict[str, dict[str, Any]] = {}
    for source in ("api", "service_shutdown", "event_loop"):
        runs = []
        for _ in range(n):
            runs.append(await in_process(ws, source, window))
        per[source] = collect(runs)
        print(f"  {source}: {per[source]['cancelled']}/{n} cancelled", flush=True)
    per["ide_stop"] = collect(await ide_stop_runs(ws, n, window))
    print(f"  ide_stop: {per['ide_stop']['cancelled']}/{n} cancelled", flush=True)
    for source in ("ctrl_c", "ci_timeout"):
        runs = [await cli_run(ws, source, window, cal["to_first_phase_s"]) for _ in range(n_cli)]
        per[source] = collect(runs)
        print(f"  {source}: {per[source]['cancelled']}/{n_cli} cancelled", flush=True)
    forced = [await forced_run(ws) for _ in range(n_forced)]
    forced_ok = [s for s in forced if s["outcome"] == "forced"]
    forced_ms = [s["cancelLatencyMs"] for s in forced_ok if s.get("cancelLatencyMs") is not None]
    polled_ms = [s["_polledGoneMs"] for s in forced_ok]
    print(f"  forced: {len(forced_ok)}/{n_forced} forced", flush=True)

    pooled = {
        k: [v for p in per.values() for v in p[k]]
        for k in ("cancelLatencyMs", "cancelReturnAfterSeenMs", "cleanupLatencyMs")
    }
    d_seen, d_clean, d_forced = (
        dist(pooled["cancelReturnAfterSeenMs"]),
        dist(pooled["cleanupLatencyMs"]),
        dist(forced_ms),
    )
    limit_ms = GRACE_S * 1000 + 200
    figures = [
        figure(
            "cancelReturnAfterSeenMs, all sources",
            d_seen.get("p99"),
            "ms p99",
            "≤ 5 ms p99",
            d_seen.get("p99") is not None and d_seen["p99"] <= 5,
            fmt_dist(d_seen),
        ),
        figure(
            "cleanupLatencyMs, all sources",
            d_clean.get("p99"),
            "ms p99",
            "≤ 100 ms p99",
            d_clean.get("p99") is not None and d_clean["p99"] <= 100,
            fmt_dist(d_clean),
        ),
        figure(
            "forced: request → worker gone (grace 1.0 s)",
            d_forced.get("p99"),
            "ms p99",
            f"≤ {limit_ms:g} ms",
            d_forced.get("max") is not None and d_forced["max"] <= limit_ms,
            fmt_dist(d_forced) + f"; independent pid poll: {fmt_dist(dist(polled_ms))}",
        ),
        figure(
            "cancelLatencyMs (request → builder return), all sources",
            dist(pooled["cancelLatencyMs"]).get("p50"),
            "ms p50",
            None,
            None,
            fmt_dist(dist(pooled["cancelLatencyMs"])) + " — dominated by the wait for the next callback (no target)",
        ),
    ]
    table = []
    for source, p in per.items():
        row = {
            "source": source,
            "runs": p["runs"],
            "cancelled": p["cancelled"],
            "builtBeforeCancel": p["built_before_cancel"],
            "other": p["other"],
            "cleanupStatus": p["cleanupStatus"],
        }
        for k in ("cancelLatencyMs", "cancelReturnAfterSeenMs", "cleanupLatencyMs"):
            row[k] = dist(p[k])
        table.append(row)
        figures.append(
            figure(
                f"{source}: cancelReturnAfterSeenMs",
                row["cancelReturnAfterSeenMs"].get("p99"),
                "ms p99",
                "≤ 5 ms p99",
                row["cancelReturnAfterSeenMs"].get("p99") is not None and row["cancelReturnAfterSeenMs"]["p99"] <= 5,
                f"{p['cancelled']}/{p['runs']} cancelled; request→return {fmt_dist(row['cancelLatencyMs'])}; "
                f"seen→return {fmt_dist(row['cancelReturnAfterSeenMs'])}; cleanup {fmt_dist(row['cleanupLatencyMs'])}",
            )
        )
    return {
        "title": "Cancel latency",
        "bench": "bench_cancel_latency",
        "method": f"`demo` builds cancelled at uniform random points within {window:.2f} s after the first phase; {n} "
        f"per in-process/LSP source, {n_cli} per CLI source, {n_forced} forced",
        "figures": figures,
        "table": table,
        "forced": {
            "runs": n_forced,
            "forced": len(forced_ok),
            "requestToGoneMs": d_forced,
            "polledGoneMs": dist(polled_ms),
        },
        "calibration": cal,
        "notes": [
            "builds that finished before their cancel arrived (outcome built) are counted but excluded from the "
            "latencies",
            "a cancel seen before the builder started (no callback saw it) has no cancelReturnAfterSeenMs",
        ],
    }


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--n", type=int, default=20, help="cancels per in-process and LSP source")
    ap.add_argument("--n-cli", type=int, default=10, help="cancels per CLI source (ctrl_c, ci_timeout)")
    ap.add_argument("--n-forced", type=int, default=10)
    args = ap.parse_args()
    if args.quick:
        args.n, args.n_cli, args.n_forced = 2, 2, 2
    every_build_builds()  # else the calibration's engine is served to the editor's and the CLI's runs: no stop
    emit(asyncio.run(run(args.n, args.n_cli, args.n_forced)), args.json)


if __name__ == "__main__":
    main()
