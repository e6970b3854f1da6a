"""Stop of the quickstart's `large`: a SIGINT (what Ctrl-C sends) to `trtls build --engine large` at fixed points of
its half-minute build, and the time from the signal to the process's exit.

Usage: python benchmarks/bench_large_stop.py [--at 3 8 15 25] [--rounds 3] [--json out.json]

Each run also gives, from its own `--json` event stream, the longest silence between two of the builder's events
(what a cancel may have to wait for) and the evidence's cancelLatencyMs (request → builder return). A previous
engine sits at the output; every run checks it is byte for byte intact. Wall times: under load they stretch by the
load; the longest silence is listed so a reader can tell a slow machine from a slow stop.
"""

from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import emit, figure, parser, workspace

ENV = {**os.environ, "TRTLS_STORE": "off"}
PREVIOUS = b"a previous good engine"


def stop_once(ws: Path, at_s: float) -> dict[str, Any]:
    engine = ws / "build" / "large.engine"
    engine.parent.mkdir(parents=True, exist_ok=True)
    engine.write_bytes(PREVIOUS)
    t0 = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-m", "trtls", "build", str(ws), "--engine", "large", "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=ENV,
    )  # fmt: skip
    lines: list[tuple[float, str]] = []  # (arrival time, JSON line), read on a thread as they come

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append((time.monotonic(), line))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    time.sleep(max(0.0, at_s - (time.monotonic() - t0)))
    signalled = time.monotonic()
    proc.send_signal(signal.SIGINT)
    proc.wait()
    exited = time.monotonic()
    reader.join()
    events = [(t, json.loads(line)) for t, line in lines if line.startswith("{")]
    summary = next((e["summary"] for _, e in events if e.get("type") == "summary"), {})
    stamps = [t for t, e in events if e.get("type") in ("step", "phase_start")]
    gaps = [b - a for a, b in zip(stamps, stamps[1:], strict=False)]
    return {
        "at_s": at_s,
        "rc": proc.returncode,
        "outcome": summary.get("outcome"),
        "sigint_to_exit_s": round(exited - signalled, 3),
        "cancel_latency_ms": summary.get("cancelLatencyMs"),
        "longest_silence_s": round(max(gaps), 3) if gaps else None,
        "previous_intact": engine.read_bytes() == PREVIOUS,
    }


def main() -> int:
    ap = parser(__doc__)
    ap.add_argument("--at", type=float, nargs="+", default=[3.0, 8.0, 15.0, 25.0], help="SIGINT this long after start")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    ws = workspace(name="large-stop")
    load = os.getloadavg()[0]
    runs = [stop_once(ws, at) for _ in range(1 if args.quick else args.rounds) for at in args.at]
    for r in runs:
        print(json.dumps(r))
    clean = all(r["rc"] == 130 and r["outcome"] == "cancelled" and r["previous_intact"] for r in runs)
    exits = [r["sigint_to_exit_s"] for r in runs if r["sigint_to_exit_s"] is not None]
    silences = [r["longest_silence_s"] for r in runs if r["longest_silence_s"] is not None]
    emit(
        {
            "title": "Stop of large (SIGINT → exit)",
            "figures": [
                figure("every stop cancelled, exit 130, previous engine intact", clean, ok=clean),
                figure(
                    "SIGINT → exit, median (max)",
                    f"{statistics.median(exits):.2f} ({max(exits):.2f})",
                    "s",
                    detail=f"{len(exits)} runs at {args.at} s; load average {load:.1f} → {os.getloadavg()[0]:.1f}",
                ),  # fmt: skip
                figure("longest silence between builder events, max over runs", max(silences), "s (wall)"),
            ],
            "runs": runs,
        },
        args.json,
    )
    return 0 if clean else 1


if __name__ == "__main__":
    sys.exit(main())
