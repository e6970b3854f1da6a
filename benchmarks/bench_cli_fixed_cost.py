"""The fixed cost of `trtls build`: the whole CLI run versus a bare TensorRT-RTX script doing the same build.

Both are whole processes timed from the outside, as a person waits for them: `trtls build WS --engine NAME`
(output to a pipe, so the plain view) against `python _bare_build.py` (import TensorRT-RTX, parse the ONNX, one
profile, build, write the engine with an fsync; no trtls code). Pairs are interleaved and alternate which
runs first, so drift in machine load hits both alike. Figures: the median of the per-pair ratios CLI/bare of
wall time (the target) and of CPU time (user+sys of the process and its children; less sensitive to other
load on the machine, reported beside it).

Targets (issue 14): demo ≤ 1.10 (was 1.23, 9 pairs), large ≤ 1.02 (was 1.04, 3 pairs).
Usage: python benchmarks/bench_cli_fixed_cost.py [--engine demo|large|both] [--pairs N] [--json out.json]
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import emit, figure, parser, workspace

HERE = Path(__file__).resolve().parent
TARGETS = {"demo": 1.10, "large": 1.02}
TRTLS = [sys.executable, "-m", "trtls", "build"]


def timed(cmd: list[str]) -> tuple[float, float]:
    """(wall s, CPU s of the process tree) of one run; a failed run is an error, never a figure."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}: {proc.stderr[-1000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def measure(engine: str, pairs: int) -> dict:
    ws = workspace(Path(tempfile.mkdtemp(prefix="trtls-bench-fixed-")))
    onnx = ws / "models" / f"{engine}.onnx"
    cli = [*TRTLS, str(ws), "--engine", engine]
    bare = [sys.executable, str(HERE / "_bare_build.py"), str(onnx), str(ws / "build" / f"{engine}.bare.engine")]
    timed(cli)  # warm-up: page cache, .pyc files, a previous engine and history like a person's second build
    timed(bare)
    rows = []
    for i in range(pairs):
        order = [("cli", cli), ("bare", bare)] if i % 2 == 0 else [("bare", bare), ("cli", cli)]
        got = {name: timed(cmd) for name, cmd in order}
        rows.append({"cli": got["cli"], "bare": got["bare"], "first": order[0][0], "load": os.getloadavg()[0]})
        c, b = got["cli"], got["bare"]
        print(
            f"  {engine} pair {i + 1}/{pairs} ({order[0][0]} first): wall {c[0]:.2f}/{b[0]:.2f} s = {c[0] / b[0]:.3f}, "
            f"CPU {c[1]:.2f}/{b[1]:.2f} s = {c[1] / b[1]:.3f}, load {rows[-1]['load']:.1f}",
            flush=True,
        )
    return {"engine": engine, "rows": rows}


def figures_of(m: dict) -> list[dict]:
    engine, rows = m["engine"], m["rows"]
    wall = [r["cli"][0] / r["bare"][0] for r in rows]
    cpu = [r["cli"][1] / r["bare"][1] for r in rows]
    target = TARGETS[engine]
    q = statistics.quantiles(wall, n=4) if len(wall) >= 2 else [wall[0]] * 3
    return [
        figure(
            f"{engine}: wall time ratio CLI/bare (median)",
            round(statistics.median(wall), 3),
            "×",
            f"≤ {target}",
            statistics.median(wall) <= target,
            f"{len(rows)} interleaved pairs; min {min(wall):.3f}, max {max(wall):.3f}, IQR {q[0]:.3f}–{q[2]:.3f}; "
            f"median wall {statistics.median(r['cli'][0] for r in rows):.2f} s vs "
            f"{statistics.median(r['bare'][0] for r in rows):.2f} s; load average "
            f"{min(r['load'] for r in rows):.1f}–{max(r['load'] for r in rows):.1f}",
        ),
        figure(
            f"{engine}: CPU time ratio CLI/bare (median)",
            round(statistics.median(cpu), 3),
            "×",
            None,
            None,
            f"user+sys of the whole process tree; median {statistics.median(r['cli'][1] for r in rows):.2f} s vs "
            f"{statistics.median(r['bare'][1] for r in rows):.2f} s",
        ),
    ]


def main() -> int:
    ap = parser(__doc__)
    ap.add_argument("--engine", choices=("demo", "large", "both"), default="both")
    ap.add_argument("--pairs", type=int, help="pairs per engine (default: demo 9, large 3; --quick: 2 and 1)")
    args = ap.parse_args()
    engines = ["demo", "large"] if args.engine == "both" else [args.engine]
    figures = []
    for engine in engines:
        default = {"demo": 9, "large": 3}[engine] if not args.quick else {"demo": 2, "large": 1}[engine]
        figures += figures_of(measure(engine, args.pairs or default))
    emit(
        {
            "title": "Fixed cost of trtls build (whole CLI run vs a bare TensorRT-RTX script)",
            "figures": figures,
            "notes": [
                "the bare script: benchmarks/_bare_build.py (import, parse, one profile, build, write + fsync)",
                "the CLI run includes the worker process, events, evidence (summary, events, tree), history and "
                "the terminal output",
            ],
        },
        args.json,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
