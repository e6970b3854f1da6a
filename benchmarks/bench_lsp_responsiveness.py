"""LSP responsiveness while builds stream: hover and completion round trips over real stdio, with 4
and with 16 `large` builds running in copies of the quickstart folder (buildTree opt-in, so the server
also streams `trtls/buildTree` + progress for every build). Target: p99 ≤ 20 ms with 4 builds.

Also `initialize`: (a) request → response on a server whose imports are done, (b) process spawn →
initialize response (what an editor waits for). Target ≤ 300 ms.

Usage: python benchmarks/bench_lsp_responsiveness.py [--requests 200] [--builds 4 16] [--json out.json]
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from lsprotocol import types as lsp
from pytest_lsp import make_test_lsp_client

from _common import dist, emit, every_build_builds, figure, fmt_dist, parser, workspace
from _lsp import SERVER, caps, execute, open_recipe, start_server, until

TARGET_MS = 20.0
INIT_TARGET_MS = 300.0


def positions(text: str) -> tuple[tuple[int, int], tuple[int, int]]:
    lines = text.splitlines()
    hover = next(
        (i, line.index("optimization_level") + 3) for i, line in enumerate(lines) if "optimization_level" in line
    )
    comp = next((i, len(line)) for i, line in enumerate(lines) if line.startswith("cancel_grace_s"))
    return hover, comp


async def under_load(n_builds: int, requests: int) -> dict:
    root = Path(tempfile.mkdtemp(prefix="trtls-bench-lsp-"))
    spaces = [workspace(root, f"ws{i}") for i in range(n_builds)]
    client, trees = await start_server(build_tree=True)
    try:
        uris = [open_recipe(client, ws) for ws in spaces]
        ids = []
        for uri in uris:
            res = await execute(client, "trtls.buildEngine", {"uri": uri, "engine": "large"})
            ids.append(res["buildId"])
        # every build streams (its tree has phases) before we measure
        await until(
            lambda: all(any(t.get("buildId") == b and t.get("phases") for t in trees) for b in ids),
            timeout=300,
            step=0.1,
        )
        trees_before = len(trees)
        text = (spaces[0] / "trtls.toml").read_text()
        (hl, hc), (cl, cc) = positions(text)
        doc = lsp.TextDocumentIdentifier(uris[0])
        hover_ms, comp_ms = [], []
        t_window = time.perf_counter()
        for i in range(requests):
            t0 = time.perf_counter()
            h = await client.text_document_hover_async(lsp.HoverParams(doc, lsp.Position(hl, hc)))
            hover_ms.append((time.perf_counter() - t0) * 1e3)
            t0 = time.perf_counter()
            c = await client.text_document_completion_async(lsp.CompletionParams(doc, lsp.Position(cl, cc)))
            comp_ms.append((time.perf_counter() - t0) * 1e3)
            if i == 0:
                assert h is not None, "hover returned nothing at the chosen position"
        window_s = time.perf_counter() - t_window
        listed = await execute(client, "trtls.listBuilds", {})
        running_after = sum(1 for b in listed["builds"] if b["status"] == "running")
        trees_during = len(trees) - trees_before
        for b in ids:
            await execute(client, "trtls.cancelBuild", {"buildId": b})
        await until(
            lambda: all(
                any(t.get("buildId") == b and t.get("status") not in ("running", "starting") for t in trees)
                for b in ids
            ),
            timeout=300,
            step=0.1,
        )
    finally:
        await client.shutdown_session()
    return {
        "builds": n_builds,
        "hover": dist(hover_ms),
        "completion": dist(comp_ms),
        "all": dist(hover_ms + comp_ms),
        "runningAfter": running_after,
        "treesDuringWindow": trees_during,
        "windowS": round(window_s, 2),
        "completionItems": len(c.items) if c else 0,
    }


async def init_times(n: int) -> dict:
    warm, cold = [], []
    for i in range(n):
        client = make_test_lsp_client()
        t_spawn = time.perf_counter()
        await client.start_io(*SERVER)
        params = lsp.InitializeParams(capabilities=caps(), initialization_options={"buildTree": True})
        if i % 2 == 1:  # (a) a started server: let its imports finish first
            await asyncio.sleep(3.0)
        client.capabilities = params.capabilities  # what initialize_session records before it asks
        t_req = time.perf_counter()
        await client.initialize_async(params)
        t_resp = time.perf_counter()
        (warm if i % 2 == 1 else cold).append(((t_resp - t_req) if i % 2 == 1 else (t_resp - t_spawn)) * 1e3)
        client.initialized(lsp.InitializedParams())
        await client.shutdown_async(None)
        client.exit(None)
        await client.stop()
    return {"request_to_response": dist(warm), "spawn_to_response": dist(cold)}


async def run(requests: int, loads: list[int], n_init: int) -> dict:
    init = await init_times(n_init)
    print(
        f"  initialize: request→response {fmt_dist(init['request_to_response'])}; spawn→response "
        f"{fmt_dist(init['spawn_to_response'])}",
        flush=True,
    )
    results = []
    for n in loads:
        r = await under_load(n, requests)
        results.append(r)
        print(
            f"  {n} builds: hover {fmt_dist(r['hover'])}; completion {fmt_dist(r['completion'])}; "
            f"{r['treesDuringWindow']} buildTree notifications during the {r['windowS']} s window, {r['runningAfter']} "
            "builds still running after",
            flush=True,
        )
    figures = []
    for r in results:
        target = TARGET_MS if r["builds"] == 4 else None
        for kind in ("hover", "completion"):
            d = r[kind]
            figures.append(
                figure(
                    f"{kind} round trip, {r['builds']} builds streaming",
                    d["p99"],
                    "ms p99",
                    f"≤ {TARGET_MS:g} ms p99" if target else "(no target; reported)",
                    (d["p99"] <= target) if target else None,
                    fmt_dist(d),
                )
            )
    a, b = init["request_to_response"], init["spawn_to_response"]
    figures.append(
        figure(
            "initialize, request → response (started server)",
            a["p50"],
            "ms p50",
            f"≤ {INIT_TARGET_MS:g} ms",
            a["max"] <= INIT_TARGET_MS,
            fmt_dist(a),
        )
    )
    figures.append(
        figure(
            "initialize, process spawn → response",
            b["p50"],
            "ms p50",
            f"≤ {INIT_TARGET_MS:g} ms",
            b["max"] <= INIT_TARGET_MS,
            fmt_dist(b),
        )
    )
    return {
        "title": "LSP responsiveness",
        "bench": "bench_lsp_responsiveness",
        "method": f"{requests} hover + {requests} completion requests, sequential, over stdio (pytest-lsp client) "
        f"while N `large` builds stream; initialize ×{n_init}",
        "figures": figures,
        "loads": results,
        "init": init,
        "notes": [
            "round trips include the client's own JSON-RPC handling in this process (pygls client), so they are an "
            "upper bound on the server's time"
        ],
    }


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--builds", type=int, nargs="+", default=[4, 16])
    ap.add_argument("--init-runs", type=int, default=10)
    args = ap.parse_args()
    every_build_builds()
    if args.quick:
        args.requests, args.builds, args.init_runs = 30, [2], 4
    emit(asyncio.run(run(args.requests, args.builds, args.init_runs)), args.json)


if __name__ == "__main__":
    main()
