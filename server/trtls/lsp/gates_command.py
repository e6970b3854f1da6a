"""`trtls.runGates {uri, route}`: the gates with one progress token, findings as diagnostics."""

from __future__ import annotations

import asyncio
import threading
import uuid
from typing import Any

from lsprotocol import types as lsp

from trtls.core.findings import Origin
from trtls.core.outcome import gates_outcome
from trtls.lsp.progress_end import end_progress


async def run_gates_command(ls: Any, args: Any) -> dict[str, Any]:
    from trtls.gates.run import run_gates

    loaded = ls.recipe(args.uri)
    ls.store.set(args.uri, Origin.recipe, "", loaded.findings)
    if loaded.recipe is None:
        ls.publish(args.uri)
        return {
            "route": args.route,
            "decision": None,
            "status": "invalid_recipe",
            "errors": [f"{loaded.location(f)}: {f.code} {f.message}" for f in loaded.errors],
        }
    if args.route not in loaded.recipe.routes:
        from pygls.exceptions import JsonRpcInvalidParams

        raise JsonRpcInvalidParams(
            f"no route '{args.route}' in {loaded.path.name} (routes: {', '.join(loaded.recipe.routes) or 'none'})"
        )

    token = f"trtls-gates-{uuid.uuid4()}"
    has_progress = bool(ls.client_capabilities.window and ls.client_capabilities.window.work_done_progress)
    stop = threading.Event()
    loop = asyncio.get_running_loop()
    if has_progress:
        await ls.work_done_progress.create_async(token)
        ls.work_done_progress.begin(
            token, lsp.WorkDoneProgressBegin(title=f"Gates {args.route}", cancellable=True, percentage=0)
        )
        fut = ls.work_done_progress.tokens.get(token)
        if fut is not None:
            fut.add_done_callback(lambda f: stop.set() if f.cancelled() else None)

    def progress(gate: int, text: str) -> None:
        if has_progress:
            loop.call_soon_threadsafe(
                ls.work_done_progress.report,
                token,
                lsp.WorkDoneProgressReport(message=f"gate {gate}: {text}", percentage=min(100, (gate - 1) * 20)),
            )

    result = await asyncio.to_thread(
        run_gates,
        loaded,
        args.route,
        gates=args.gates,
        progress=progress,
        cancel=stop.is_set,
    )
    findings = [f for f in (c.finding() for c in result.checks) if f is not None]
    ls.store.set(args.uri, Origin.gates, args.route, findings)
    ls.publish(args.uri)
    decision = result.decision
    if has_progress:
        # a cancelled run made no decision: never end it with one ("hold (stopped)" read like a verdict)
        outcome, kind = gates_outcome(decision, stop.is_set())
        ended = f"{args.route}: no decision (cancelled)" if kind == "cancelled" else f"{args.route}: {decision}"
        end_progress(ls, token, ended, outcome, kind)
    return {
        "route": args.route,
        "decision": decision,
        "stopped": stop.is_set(),
        "checks": [
            {"gate": c.gate, "name": c.name, "status": c.status, "code": c.code, "message": c.message}
            for c in result.checks
        ],
        "summaryPath": str(getattr(result, "summary_path", "") or ""),
    }
