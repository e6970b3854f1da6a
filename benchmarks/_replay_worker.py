"""A synthetic external worker (docs/protocol.md) that replays a real build's recorded events at their recorded pace.

Usage (as a recipe's `worker = [...]`): python _replay_worker.py EVENTS_JSONL
Reads the job line, then writes the recording's events (build_started rewritten with this job's id, times
re-stamped now) with the gaps the real build had, so N of them stream like N real builds without N TensorRT
builds' memory. A cancel on stdin ends it cooperatively (cancel_acknowledged, build_finished cancelled); the end
of the recording ends it `failed` ("replay ended": no engine exists).
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time


def main() -> int:
    recorded = [json.loads(line) for line in open(sys.argv[1], encoding="utf-8") if line.strip()]
    job = json.loads(sys.stdin.readline())
    out = os.fdopen(os.dup(1), "w", buffering=1)
    cancel: dict = {}

    def watch() -> None:
        for line in sys.stdin:
            msg = json.loads(line)
            if msg.get("type") == "cancel":
                cancel.update(msg)
                return
        cancel.setdefault("source", "service_shutdown")

    threading.Thread(target=watch, daemon=True).start()

    def emit(ev: dict) -> None:
        out.write(json.dumps({**ev, "t_ns": time.monotonic_ns()}) + "\n")

    t0_rec = recorded[0]["t_ns"]
    t0 = time.monotonic_ns()
    for ev in recorded:
        if ev["type"] in ("artifact", "build_finished", "cancel_acknowledged", "cache_decision", "builder_returned"):
            continue
        if ev["type"] == "build_started":
            ev = {**ev, "build_id": job["build_id"], "engine": job["engine"], "pid": os.getpid()}
        delay = (ev["t_ns"] - t0_rec) - (time.monotonic_ns() - t0)
        while delay > 0 and not cancel:
            time.sleep(min(delay / 1e9, 0.02))
            delay = (ev["t_ns"] - t0_rec) - (time.monotonic_ns() - t0)
        if cancel:
            emit({"v": 1, "type": "builder_returned", "ok": False})
            emit(
                {
                    "v": 1,
                    "type": "cancel_acknowledged",
                    "source": cancel["source"],
                    "t_request_ns": cancel.get("t_request_ns"),
                }
            )
            emit({"v": 1, "type": "build_finished", "outcome": "cancelled", "cleanup_status": "not_needed"})
            return 0
        emit(ev)
    emit({"v": 1, "type": "builder_returned", "ok": False})
    emit(
        {"v": 1, "type": "build_finished", "outcome": "failed", "error": "replay ended", "cleanup_status": "not_needed"}
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
