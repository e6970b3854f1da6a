"""A synthetic external worker (docs/protocol.md, trtls.events/1) that floods N events as fast as it can.

Usage (as a recipe's `worker = [...]`): python _flood_worker.py --events N | --seconds S [--steps-per-phase 1000]
Reads the job line, writes build_started, then phases of `steps-per-phase` step events under one root,
then builder_returned and build_finished. Lines are pre-serialised and written in large chunks so the
worker itself is not the bottleneck; its own write rate goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=100_000)
    ap.add_argument("--steps-per-phase", type=int, default=1000)
    ap.add_argument("--seconds", type=float, default=0.0, help="keep flooding for this long instead of a fixed count")
    args = ap.parse_args()
    job = json.loads(sys.stdin.readline())
    out = os.fdopen(os.dup(1), "wb", buffering=1 << 20)
    now = time.monotonic_ns

    def line(kind: str, **f) -> bytes:
        return (json.dumps({"v": 1, "type": kind, "t_ns": now(), **f}) + "\n").encode()

    out.write(
        line(
            "build_started",
            build_id=job["build_id"],
            engine=job["engine"],
            pid=os.getpid(),
            environment={"module": "synthetic", "version": "0", "is_rtx": False},
            build_config_hash="0" * 64,
            effective_settings={},
        )
    )
    out.write(line("phase_start", phase_id="0", parent_id=None, name="Flood", num_steps=1, tid=0))
    sent, k, t0 = 2, 0, time.perf_counter()
    chunk: list[bytes] = []
    deadline = time.perf_counter() + args.seconds if args.seconds else None
    if deadline is not None:
        args.events = 1 << 62
    while sent < args.events - 3 and (deadline is None or time.perf_counter() < deadline):
        pid = f"0.{k}"
        n = min(args.steps_per_phase, args.events - 3 - sent - 2)
        chunk.append(line("phase_start", phase_id=pid, parent_id="0", name=f"Phase {k}", num_steps=max(n, 1), tid=0))
        for s in range(n):
            chunk.append(b'{"v":1,"type":"step","t_ns":%d,"phase_id":"%s","step":%d}\n' % (now(), pid.encode(), s))
        chunk.append(line("phase_finish", phase_id=pid, status="done", step=max(n - 1, 0)))
        sent += n + 2
        k += 1
        if len(chunk) > 2000:
            out.write(b"".join(chunk))
            chunk = []
    out.write(b"".join(chunk))
    out.write(line("phase_finish", phase_id="0", status="done", step=0))
    out.write(line("builder_returned", ok=True))
    out.write(line("build_finished", outcome="built", cleanup_status="not_needed", t_cleanup_ns=now()))
    out.flush()
    dt = time.perf_counter() - t0
    print(
        json.dumps({"flood_events": sent + 3, "flood_seconds": dt, "flood_rate": (sent + 3) / dt}),
        file=sys.stderr,
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
