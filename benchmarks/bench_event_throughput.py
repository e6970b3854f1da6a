"""Event throughput worker → supervisor → server, with a synthetic external worker that floods events.

(a) Supervisor only: events/s parsed and folded into the phase tree (first event → build_finished).
(b) Through the language server to a client: the server's fold rate (events sent / time from the first
    to the last event, from the server's evidence) and what the client receives: `trtls/buildTree` +
    `$/progress` messages, throttled by the server to ≤ 5 reports/s per build (a sustained flood of
    --seconds, so the throttle is measured over a long enough window).

Usage: python benchmarks/bench_event_throughput.py [--events 200000] [--json out.json]
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import emit, every_build_builds, figure, parser
from trtls.builds.supervisor.supervisor import Supervisor
from trtls.core.recipe import load_recipe

FLOOD = Path(__file__).resolve().parent / "_flood_worker.py"


def flood_workspace(events: int, seconds: float = 0.0) -> Path:
    ws = Path(tempfile.mkdtemp(prefix="trtls-bench-flood-")) / "ws"
    ws.mkdir()
    (ws / "trtls.toml").write_text(
        "[engines.flood]\n"
        'onnx = "flood.onnx"\n'
        'output = "build/flood.engine"\n'
        f"worker = {json.dumps([sys.executable, str(FLOOD), '--events', str(events), '--seconds', str(seconds)])}\n"
    )
    return ws


def event_span(evidence_dir: Path) -> tuple[int, float]:
    """Events written by the worker and the seconds from the first to the last, by the worker's clock."""
    lines = (evidence_dir / "events.jsonl").read_bytes().splitlines()
    first, last = json.loads(lines[0])["t_ns"], json.loads(lines[-1])["t_ns"]
    return len(lines), (last - first) / 1e9


async def supervisor_only(events: int) -> dict:
    ws = flood_workspace(events)
    build = Supervisor().start(load_recipe(ws / "trtls.toml"), "flood")
    times: list[float] = []
    build.listeners.append(lambda b, ev: times.append(time.perf_counter()) if ev is not None else None)
    s = await build.wait()
    assert s.outcome == "built", s.error or s.stderrTail
    n = len(times)
    folded = sum((p.get("step") or 0) + 1 for p in s.phaseTree if p["id"] != "0")
    flood = next((json.loads(x) for x in s.stderrTail if x.startswith("{")), {})
    return {
        "events": n,
        "seconds": times[-1] - times[0],
        "rate": n / (times[-1] - times[0]),
        "phases": len(s.phaseTree),
        "stepsFolded": folded,
        "workerWriteRate": flood.get("flood_rate"),
    }


async def through_server(events: int, seconds: float) -> dict:
    from lsprotocol import types as lsp

    from _lsp import execute, open_recipe, start_server, until

    ws = flood_workspace(events, seconds)
    client, trees = await start_server(build_tree=True)
    try:
        uri = open_recipe(client, ws)
        known = set(client.progress_reports)
        t0 = time.perf_counter()
        res = await execute(client, "trtls.buildEngine", {"uri": uri, "engine": "flood"})
        await until(lambda: set(client.progress_reports) - known, timeout=60)
        token = next(iter(set(client.progress_reports) - known))
        await until(
            lambda: any(isinstance(r, lsp.WorkDoneProgressEnd) for r in client.progress_reports[token]), timeout=600
        )
        client_s = time.perf_counter() - t0
        summary = (await execute(client, "trtls.showEvidence", {"buildId": res["buildId"]}))["summary"]
    finally:
        await client.shutdown_session()
    n, span = event_span(ws / ".trtls" / "runs" / res["buildId"])
    reports = client.progress_reports[token]
    n_trees = sum(1 for t in trees if t.get("buildId") == res["buildId"])
    duration = summary["durationS"]
    return {
        "events": n,
        "serverFoldSeconds": duration,
        "serverFoldRate": n / duration,
        "workerSpanSeconds": span,
        "progressMessages": len(reports),
        "buildTreeMessages": n_trees,
        "clientSeconds": client_s,
        "outputRate": (len(reports) + n_trees) / duration,
        "reportsPerSecond": sum(1 for r in reports if isinstance(r, lsp.WorkDoneProgressReport)) / duration,
    }


async def run(events: int, seconds: float) -> dict:
    a = await supervisor_only(events)
    print(
        f"  (a) supervisor: {a['events']} events in {a['seconds']:.2f} s = {a['rate']:,.0f} events/s "
        f"(worker writes {a['workerWriteRate'] or 0:,.0f}/s); {a['phases']} phases, {a['stepsFolded']} steps in the "
        "tree",
        flush=True,
    )
    b = await through_server(events, seconds)
    print(
        f"  (b) server: {b['events']} events folded in {b['serverFoldSeconds']:.2f} s = {b['serverFoldRate']:,.0f} "
        "events/s; "
        f"client got {b['progressMessages']} $/progress + {b['buildTreeMessages']} buildTree = {b['outputRate']:.1f} "
        "msg/s",
        flush=True,
    )
    return {
        "title": "Event throughput",
        "bench": "bench_event_throughput",
        "method": "synthetic external worker (benchmarks/_flood_worker.py, recipe `worker = [...]`) writing events "
        f"(steps in phases of 1000) as fast as it can: {events:,} events for (a), a {seconds:g} s flood for (b)",
        "figures": [
            figure(
                "(a) worker → Supervisor, events folded per second",
                round(a["rate"]),
                "events/s",
                None,
                None,
                f"{a['events']:,} events in {a['seconds']:.2f} s; the flood worker alone writes "
                f"{a['workerWriteRate'] or 0:,.0f}/s",
            ),
            figure(
                "(b) worker → language server, events folded per second",
                round(b["serverFoldRate"]),
                "events/s",
                None,
                None,
                f"{b['events']:,} events flooded for {seconds:g} s, build {b['serverFoldSeconds']:.2f} s (evidence "
                "durationS)",
            ),
            figure(
                "(b) messages to the client (buildTree + $/progress)",
                b["progressMessages"] + b["buildTreeMessages"],
                "messages",
                None,
                None,
                f"{b['buildTreeMessages']} buildTree + {b['progressMessages']} $/progress (begin/report/end) = "
                f"{b['outputRate']:.1f} msg/s for {b['events']:,} events",
            ),
            figure(
                "(b) progress reports per second per build",
                round(b["reportsPerSecond"], 2),
                "reports/s",
                "≤ 5 /s (throttle)",
                b["reportsPerSecond"] <= 5.0,
            ),
        ],
        "supervisor": a,
        "server": b,
        "notes": [
            "the built-in worker coalesces steps to ≤ 1 per phase per 50 ms, so real builds send far fewer events than "
            "this flood"
        ],
    }


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--events", type=int, default=200_000, help="(a): a fixed count")
    ap.add_argument("--seconds", type=float, default=8.0, help="(b): flood the server for this long")
    args = ap.parse_args()
    every_build_builds()
    emit(asyncio.run(run(20_000 if args.quick else args.events, 3.0 if args.quick else args.seconds)), args.json)


if __name__ == "__main__":
    main()
