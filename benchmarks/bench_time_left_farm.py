"""How right is the time left of a farm matrix's cells? The estimate (trtls.builds.supervisor.time_left) at 25, 50 and
75 % of every cell of a real `trtls build --matrix` on a real local Ray farm, against the time that was really left.

    python3 benchmarks/bench_time_left_farm.py --cells 16 --model large --runs 3 --json out.json  # the 16-core host
    python benchmarks/bench_time_left_farm.py --quick      # 3 `demo` cells, 3 runs: a smoke run on 2 cores (~40 s)
    python benchmarks/bench_time_left_farm.py --replay DIR # judge again the streams a `--keep DIR` run kept

On the 16-core host (python3 and the kit's wheels, ../shared/notes/device-farm.md), after the kit's `recv` calls:
`bash .device/on_device.sh go python3 benchmarks/bench_time_left_farm.py --cells 16 --model large --runs 3
--keep /tmp/tlf --json $OUT/time-left-farm.json > $OUT/time-left-farm.txt 2>&1; tar czf $OUT/time-left-farm-streams.tgz
-C /tmp/tlf .` (48 streams, and at most 8 files come back: hence the tar) — three matrices of ~80 s each
(bench_farm_overhead's cold run of the same 16 cells took 78.9 s there), about 4–5 minutes in all.

The matrix is bench_farm_overhead's: N cells of the quickstart's `large` (or `demo`), one per avg_timing_iterations
value 1..N, so each cell is a build config of its own, on an embedded Ray instance (`address = "local"`) with N slots,
no engine store, `--rebuild`. It runs `--runs` times in one workspace, one run after the other; each cell's event
stream is read from its evidence (`.trtls/runs/<cell build id>/events.jsonl`) and kept (`--keep DIR`:
DIR/run-R/cell-C.jsonl). Run 0 only gives history; every later run's cells are judged as benchmarks/bench_time_left.py
judges a single build (its `history_of` and `judge_build`): the history of a cell is the builds of the same config
(buildConfigHash) in the runs before it — what `.trtls/history.json` holds at that point — its events are replayed up
to 25/50/75 % of its length and the estimate compared with the truth. A cell's length is from its first event
(`queued`, written when the driver starts the cell: the clock the product's time left and history's durationS count
from, give or take the tenths of a second the JSON's `historyVsSpanMaxS` shows) to `build_finished`, so Ray's queue,
placement and the node's worker start are part of what is estimated (Ray's own start, import ray and ray.init, comes
before any cell's clock starts). The same judged from the worker's first event (`environment`, TensorRT imported on
the node) is reported beside it. Reported: the median absolute error (seconds and % of the cell), how often the
interval held the truth, the clock alone (median recorded duration minus elapsed), by share and by run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import bytecode_as_installed, emit, ensure_models, figure, parser
from bench_farm_overhead import TRTLS, recipe
from bench_time_left import SHARES, history_of, judge_build, saved_events, span, summary
from trtls.core.phase_tree import NS


def config_of(evs: list[Any]) -> str:
    return next(e.build_config_hash for e in evs if e.type == "build_started")


def from_worker(evs: list[Any]) -> list[Any]:
    """The stream from the worker's first event (`environment`): without the driver's queue and placement."""
    first = next(i for i, e in enumerate(evs) if e.type == "environment")
    return evs[first:]


def run_matrix(path: Path, env: dict[str, str], keep: Path) -> dict[str, Any]:
    """One `trtls build --matrix --json`; each cell's events.jsonl copied from its evidence to `keep`/cell-C.jsonl."""
    t0 = time.monotonic()
    run = subprocess.run(
        TRTLS + ["build", str(path), "--matrix", "--json", "--no-store", "--rebuild"],
        env=env,
        capture_output=True,
        text=True,
    )
    wall = time.monotonic() - t0
    matrix: dict[str, Any] = {}
    for line in run.stdout.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if record.get("type") == "summary":
            matrix = record["summary"]
    cells = matrix.get("cells") or []
    failed = [f"{c.get('cell')}: {c.get('outcome')}" for c in cells if c.get("outcome") != "built"]
    if run.returncode != 0 or not cells or failed:
        raise SystemExit(
            f"the matrix did not build (exit {run.returncode}; {failed or 'no summary'}): {run.stderr[-600:]}"
        )
    keep.mkdir(parents=True, exist_ok=True)
    lag = []
    for cell in cells:
        evidence = Path(cell["evidence"]).parent
        stream = keep / f"cell-{cell['cell']}.jsonl"
        shutil.copyfile(evidence / "events.jsonl", stream)
        recorded = json.loads((evidence / "summary.json").read_text())["durationS"]  # what history.json records
        t0_ns, t1_ns = span(saved_events(stream))
        lag.append(abs(recorded - (t1_ns - t0_ns) / NS))
    return {"wallS": round(wall, 2), "matrixS": matrix.get("durationS"), "cells": len(cells), "historyVsSpanS": lag}


def kept_runs(keep: Path) -> list[dict[str, list[Any]]]:
    """Each kept run's streams by cell name, in run order."""
    runs = sorted(keep.glob("run-*"), key=lambda p: int(p.name.split("-", 1)[1]))
    return [{p.stem.split("-", 1)[1]: saved_events(p) for p in sorted(run.glob("cell-*.jsonl"))} for run in runs]


def judge_runs(runs: list[dict[str, list[Any]]], worker: bool = False) -> list[dict[str, Any]]:
    """Every cell of run 1 on, against the history of its config in the runs before it."""
    if worker:
        runs = [{cell: from_worker(evs) for cell, evs in run.items()} for run in runs]
    rows = []
    for k in range(1, len(runs)):
        for cell, evs in runs[k].items():
            key = config_of(evs)
            earlier = [b for run in runs[:k] for b in run.values() if config_of(b) == key]
            if earlier:  # a cell whose config no earlier run built has no history: not judged (said in the counts)
                judged = judge_build(evs, *history_of(earlier))
                rows += [{"run": k, "cell": cell, "historyBuilds": len(earlier), **row} for row in judged]
    return rows


def words(s: dict[str, Any]) -> str:
    return (
        f"{s['medianAbsErrorPct']} % of the cell · interval held {s['intervalHeld']} · clock alone "
        f"{s['clockMedianAbsErrorS']} s · phases without steps {s['phasesOnlyMedianAbsErrorS']} s · paced "
        f"{s['pacedMedianAbsErrorS']} s · no estimate {s['noEstimate']}/{s['points']} · by share {s['byShare']}"
    )


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--cells", type=int, default=16)
    ap.add_argument("--model", choices=["large", "demo"], default="large")
    ap.add_argument("--runs", type=int, default=3, help="matrix runs, one after the other (the first gives history)")
    ap.add_argument("--keep", type=Path, help="keep each cell's event stream here (run-R/cell-C.jsonl)")
    ap.add_argument("--replay", type=Path, help="judge the streams a --keep run left, without building")
    args = ap.parse_args()
    if args.quick:
        args.cells, args.model, args.runs = 3, "demo", 3
    if args.runs < 2 and not args.replay:
        raise SystemExit("--runs must be at least 2: the first run gives the history the next ones are judged with")
    tmp = Path(tempfile.mkdtemp(prefix="trtls-bench-time-left-farm-"))
    try:
        bench(args, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def bench(args: argparse.Namespace, tmp: Path) -> None:
    keep = args.replay or args.keep or tmp / "streams"
    runs_info: list[dict[str, Any]] = []
    if not args.replay:
        if args.keep and any(args.keep.glob("run-*")):  # a kept run of before would be judged as one of these
            raise SystemExit(f"--keep {args.keep} already holds runs: give an empty or new folder")
        ensure_models()
        bytecode_as_installed("ray")
        # no warm farm: an embedded Ray instance each run; no engine store (each run must build every cell)
        env = {**os.environ, "TRTLS_FARM_STATE": str(tmp / "farm.json"), "TRTLS_STORE": "off"}
        path = recipe(tmp / "ws", args.model, args.cells, args.cells)
        for r in range(args.runs):
            runs_info.append(run_matrix(path, env, keep / f"run-{r}"))
            print(f"run {r}: {runs_info[-1]['cells']} cells, {runs_info[-1]['wallS']} s", flush=True)
    runs = kept_runs(keep)
    rows = judge_runs(runs)
    if not rows:
        raise SystemExit(f"nothing to judge in {keep}: it needs two runs or more (run-0, run-1, …) of the same cells")
    worker_rows = judge_runs(runs, worker=True)
    total, worker = summary(rows), summary(worker_rows)
    lengths = [r["lengthS"] for r in rows if r["share"] == SHARES[0]]
    spread = f"{min(lengths)}–{round(statistics.median(lengths), 3)}–{max(lengths)}"
    cells = max(len(run) for run in runs)
    model = args.model if not args.replay else "kept"
    figures = [
        figure(
            f"farm matrix, {cells} cells x {len(runs) - 1} judged runs: median |error| at 25/50/75 %",
            total["medianAbsErrorS"],
            "s",
            detail=f"{words(total)} · cells {spread} s (min–median–max, from `queued`)",
        ),
        figure(
            "the same from the worker's first event (TensorRT imported on the node)",
            worker["medianAbsErrorS"],
            "s",
            detail=words(worker),
        ),
    ]
    by_run = {}
    for k in range(1, len(runs)):
        its = [r for r in rows if r["run"] == k]
        if its:
            by_run[str(k)] = s = summary(its)
            figures.append(figure(f"run {k} (history: {k} earlier build(s) of each cell's config)",
                                  s["medianAbsErrorS"], "s", detail=words(s)))  # fmt: skip
    lag = [x for info in runs_info for x in info["historyVsSpanS"]]
    emit(
        {
            "title": f"time left: accuracy on a farm matrix ({model}, {cells} cells, {len(runs)} runs, "
            f"{os.cpu_count()} cores)",
            "figures": figures,
            "model": model,
            "cells": cells,
            "runs": len(runs),
            "cpus": os.cpu_count(),
            "runWallS": [info["wallS"] for info in runs_info],
            "historyVsSpanMaxS": round(max(lag), 3) if lag else None,
            "summary": total,
            "workerSummary": worker,
            "byRun": by_run,
            "rows": rows,
            "workerRows": worker_rows,
            "date": time.strftime("%Y-%m-%d"),
        },
        args.json,
    )


if __name__ == "__main__":
    main()
