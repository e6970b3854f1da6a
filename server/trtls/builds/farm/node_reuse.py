"""The driver's side of a cell its node served from the remote engine store (docs/store.md, "A farm node and the
remote store"): no worker ran, nothing was built, and the cell ends `reused` on every face.

The node looked the key up before any worker started (builds/farm/node_store.py: the driver's own lookup missed it,
another machine published it while the cell waited for a node), restored the verified entry into the cell's job
folder and sent `{"hit": …}`. Here the engine comes back exactly as a built one does (`engine_transfer.bring_engine`:
atomic write at the output, its sha256 checked end to end against the entry's record); only its `artifact` line is
passed on — no `build_finished`, so the supervisor ends the build `reused` from the transport's `reused` (never
`built`: no usual-duration history learns a build time from it). When the cell ends, `fold_node_reuse` gives its
summary what a reuse's evidence says (builds/avoidance/reuse.py `reuse_evidence`): where the engine came from, the
producing build, the runbook fields of a run without a worker, and the one line every face shows. Then
`keep_node_served` (builds/avoidance/node_served.py, from the store's end of the cell) keeps it on this
machine as a local reuse is kept: the entry in this machine's store, the table's known-good record, one hit in the
store's statistics — so `trtls rollback`, `trtls engines` and the next build here know the engine.

Plain Python (no Ray import): the matrix folds a cell's end with it (builds/supervisor/matrix.py).
"""

from __future__ import annotations

import time
from typing import Any

from trtls.core.events import PROTOCOL_VERSION
from trtls.core.evidence import runbook_without_worker


async def bring_reused(
    actor: Any, job: dict[str, Any], where: dict[str, Any], hit: dict[str, Any], cancel: str | None = None
) -> tuple[list[bytes], dict[str, Any] | None]:
    """Fetch the engine a node served from the store into the output: (the lines to pass on, the reuse's record
    for the supervisor, or None when it did not arrive intact — the lines then end the cell failed, TRT233/TRT412).
    `cancel`: the control line of a cancel that came while the node looked: nothing is fetched, the cell ends
    cancelled and the output is as it was."""
    import json

    from trtls.builds.farm.engine_transfer import bring_engine
    from trtls.builds.farm.remote_lines import line, peek

    if cancel is not None:
        ctl = json.loads(cancel)
        note = "cancelled before the engine its node found in the remote store was fetched; the output is as it was"
        acked = line("cancel_acknowledged", source=ctl.get("source", "api"), t_request_ns=ctl.get("t_request_ns"))
        return [acked, line("build_finished", outcome="cancelled", cleanup_status="not_needed", notes=[note])], None

    held = [
        line(
            "artifact",
            action="written",
            kind="engine",
            path=hit.get("path"),
            size=hit.get("size"),
            sha256=hit.get("sha256"),
        )
    ]
    finished: dict[str, Any] = {
        "v": PROTOCOL_VERSION,
        "type": "build_finished",
        "t_ns": time.monotonic_ns(),
        "outcome": "built",
        "cleanup_status": "not_needed",
        "engine_sha256": hit.get("sha256"),
        "engine_bytes": hit.get("size"),
        "notes": [],
    }
    brought = await bring_engine(actor, job, where, finished, held)
    end = peek(brought[-1].decode())
    if end.get("outcome") != "built":
        return brought, None
    return brought[:-1], {**hit, "notes": list(end.get("notes") or [])}


def fold_node_reuse(summary: dict[str, Any], hit: dict[str, Any], up_to_date: str) -> None:
    """A cell's summary (a build summary of outcome `reused`) as a reuse's evidence: `reusedFrom` (the producing
    build, the remote and the node that served it), `engineKey`, the runbook fields of a run without a worker, the
    engine `restored`, `workerPid` null and the line every face shows (`message`: `up_to_date`, a reuse's line for
    the producing build — builds/avoidance/reuse.py `up_to_date_line` — and where it came from)."""
    src = hit.get("build") or {}
    key, url, node = str(hit.get("key")), hit.get("remote"), hit.get("node")
    summary.update(runbook_without_worker(src))
    summary["reusedFrom"] = {
        "buildId": src.get("buildId"),
        "startedAt": src.get("startedAt"),
        "durationS": src.get("durationS"),
        "storeEntry": f"{url}/ac/{key}",
        "waitedForIt": False,
        "remote": url,
        "servedByNode": node,  # the node looked the key up after this machine's own lookup had missed it
    }
    summary["engineKey"] = key
    summary["rebuiltBecause"] = None
    art = dict(summary.get("engineArtifact") or {})
    art.update(action="restored", size=hit.get("size"), sha256=hit.get("sha256"))
    summary["engineArtifact"] = art
    summary["workerPid"] = None
    summary["failure"] = None
    summary.pop("capability", None)  # no parse, no builder: a reuse's evidence has none (as builds/avoidance/reuse.py)
    summary["notes"] = [
        *(summary.get("notes") or []),
        f"no worker started: the engine of key {key[:12]} was in the remote store {url} when node {node} looked it "
        "up (after this machine's lookup had missed it)",
        *hit.get("notes", []),
    ]
    summary["message"] = f"{up_to_date} (from the remote store, served by node {node})"
