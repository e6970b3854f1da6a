"""How right is "~40 s left, 25–60 s"? The time-left estimate (trtls.builds.supervisor.time_left) at 25, 50 and 75 % of
real
builds of the quickstart and sample models, against the time that was really left.

    python benchmarks/bench_time_left.py [--quick] [--json FILE] [--builds 3]

Each engine is built `--builds` times for real (`trtls build --json --no-store --rebuild`, one after the other), its
event stream kept. Then, leave one out: for each build, the history is the other builds of the same engine (phase
medians by phase id and whole-build durations, as `.trtls/history.json` keeps them), the build's own events are
replayed up to 25/50/75 % of its length, and the estimate is compared with the truth. A build's length here is from
its worker's first event (`environment`, TensorRT imported) to `build_finished`, for the history and the truth alike.
Reported per engine and overall: the median absolute error (seconds and % of the build), how often the interval held
the truth, and the same error for the clock alone (median recorded duration minus elapsed) for comparison.

The second part, with no history of the engine (trtls.builds.supervisor.similar_builds): six demo-like models
(`VARIANTS`: segments x norms of the quickstart's generator, one profile each) are built `--builds` times each; each
is judged with no history of its own, from the others' builds (their facts as the history records them), at
25/50/75 %: the median absolute error, how often the wider interval held, and how many got "no estimate".
"""

from __future__ import annotations

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

from _common import ROOT, emit, ensure_models, figure, parser
from trtls.builds.supervisor.similar_builds import estimate_from_similar, onnx_bytes, similar
from trtls.builds.supervisor.time_left import estimate_time_left
from trtls.core.events import parse_event
from trtls.core.phase_tree import NS, PhaseTree

SHARES = (0.25, 0.5, 0.75)
VARIANTS = ((2, 10), (2, 12), (2, 14), (2, 16), (2, 20), (3, 12))  # demo-like graphs: segments x norms, one profile


def workspaces(parent: Path) -> list[tuple[Path, list[str]]]:
    ensure_models()
    subprocess.run(
        [sys.executable, str(ROOT / "samples" / "models" / "make_models.py")], check=True, capture_output=True
    )
    out = []
    for name, engines in (("quickstart", ["demo", "large"]), ("models", ["encoder", "detector", "tokens", "external"])):
        ws = parent / name
        shutil.copytree(ROOT / "samples" / name, ws, ignore=shutil.ignore_patterns(".trtls", "build", "__pycache__"))
        out.append((ws, engines))
    return out


def saved_events(path: Path) -> list[Any]:
    return [parse_event(line) for line in path.read_text().splitlines()]


def build_events(ws: Path, engine: str, keep: Path | None = None) -> list[Any]:
    env = {**os.environ, "TRTLS_STORE": "off"}
    run = subprocess.run(
        [sys.executable, "-m", "trtls", "build", str(ws), "--engine", engine, "--json", "--no-store", "--rebuild"],
        capture_output=True,
        text=True,
        env=env,
    )
    evs, lines = [], []
    for line in run.stdout.splitlines():
        record = json.loads(line)
        if record.get("type") in (None, "summary", "error") or "t_ns" not in record:
            continue
        evs.append(parse_event(line))
        lines.append(line)
    if keep is not None:  # the stream, to judge again without building (--replay)
        keep.mkdir(parents=True, exist_ok=True)
        (keep / f"{engine}-{len(list(keep.glob(engine + '-*.jsonl')))}.jsonl").write_text("\n".join(lines) + "\n")
    if run.returncode != 0 or not any(e.type == "build_finished" for e in evs):
        raise RuntimeError(f"{engine}: build failed (exit {run.returncode}): {run.stderr[-400:]}")
    return evs


def tree_until(evs: list[Any], cut_ns: int) -> PhaseTree:
    tree = PhaseTree()
    for ev in evs:
        if ev.t_ns > cut_ns:
            break
        if ev.type in ("phase_start", "step", "phase_finish"):
            tree.apply(ev)
    return tree


def span(evs: list[Any]) -> tuple[int, int]:
    return evs[0].t_ns, next(e.t_ns for e in evs if e.type == "build_finished")


def history_of(builds: list[list[Any]]) -> tuple[dict[str, float], list[float]]:
    """What `.trtls/history.json` keeps of these builds of one config: each phase id's median duration, and the
    whole-build durations (each build's `span`)."""
    phases: dict[str, list[float]] = {}
    for build in builds:
        for pid, secs in tree_until(build, span(build)[1]).durations().items():
            phases.setdefault(pid, []).append(secs)
    return {pid: statistics.median(v) for pid, v in phases.items()}, [(span(b)[1] - span(b)[0]) / NS for b in builds]


def judge_build(evs: list[Any], baselines: dict[str, float], durations: list[float]) -> list[dict[str, Any]]:
    """One build's events replayed up to 25/50/75 % of its `span`, the estimate at each point against the truth."""
    rows = []
    t0, t1 = span(evs)
    for share in SHARES:
        cut = t0 + int(share * (t1 - t0))
        truth = (t1 - cut) / NS
        left = estimate_time_left(tree_until(evs, cut), baselines, durations, t0, cut)
        clock = max(statistics.median(durations) - (cut - t0) / NS, 0.0)
        no_steps = estimate_time_left(tree_until(evs, cut), baselines, durations, t0, cut, steps=False).seconds
        paced = estimate_time_left(tree_until(evs, cut), baselines, durations, t0, cut, pace=True).seconds
        rows.append(
            {
                "share": share,
                "lengthS": round((t1 - t0) / NS, 3),
                "truthS": round(truth, 3),
                "estimateS": None if left.seconds is None else round(left.seconds, 3),
                "low": None if left.low is None else round(left.low, 3),
                "high": None if left.high is None else round(left.high, 3),
                "clockS": round(clock, 3),
                "phasesOnlyS": None if no_steps is None else round(no_steps, 3),
                "pacedS": None if paced is None else round(paced, 3),
            }
        )
    return rows


def judge(builds: list[list[Any]]) -> list[dict[str, Any]]:
    """Leave one out: each build judged against the history of the others."""
    rows = []
    for k, evs in enumerate(builds):
        history = history_of([b for i, b in enumerate(builds) if i != k])
        rows += [{"build": k, **row} for row in judge_build(evs, *history)]
    return rows


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    known = [r for r in rows if r["estimateS"] is not None]
    errors = [abs(r["estimateS"] - r["truthS"]) for r in known]
    relative = [abs(r["estimateS"] - r["truthS"]) / r["lengthS"] for r in known]
    clock = [abs(r["clockS"] - r["truthS"]) for r in rows]
    phases_only = [abs(r["phasesOnlyS"] - r["truthS"]) for r in rows if r["phasesOnlyS"] is not None]
    paced = [abs(r["pacedS"] - r["truthS"]) for r in rows if r["pacedS"] is not None]
    held = [r["low"] <= r["truthS"] <= r["high"] for r in known]
    return {
        "points": len(rows),
        "noEstimate": len(rows) - len(known),
        "medianAbsErrorS": round(statistics.median(errors), 3) if errors else None,
        "medianAbsErrorPct": round(100 * statistics.median(relative), 1) if relative else None,
        "clockMedianAbsErrorS": round(statistics.median(clock), 3),
        "phasesOnlyMedianAbsErrorS": round(statistics.median(phases_only), 3) if phases_only else None,
        "pacedMedianAbsErrorS": round(statistics.median(paced), 3) if paced else None,
        "intervalHeld": f"{sum(held)}/{len(held)}",
        "byShare": {
            str(s): round(statistics.median([abs(r["estimateS"] - r["truthS"]) for r in known if r["share"] == s]), 3)
            for s in SHARES
            if any(r["share"] == s for r in known)
        },
    }


def similar_workspace(parent: Path) -> tuple[Path, list[str]]:
    """The quickstart with one engine per VARIANTS model, each with demo's one profile."""
    import importlib.util

    import onnx

    ws = parent / "similar"
    shutil.copytree(
        ROOT / "samples" / "quickstart", ws, ignore=shutil.ignore_patterns(".trtls", "build", "__pycache__")
    )
    spec = importlib.util.spec_from_file_location("quickstart_models", ws / "make_models.py")
    assert spec is not None and spec.loader is not None
    generator = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generator)
    recipe, engines = (ws / "trtls.toml").read_text(), []
    for segments, norms in VARIANTS:
        name = f"s{segments}n{norms}"
        onnx.save(generator.build_model(name, segments, norms), str(ws / "models" / f"{name}.onnx"))
        recipe += f'\n[engines.{name}]\nonnx = "models/{name}.onnx"\noutput = "build/{name}.engine"\n'
        recipe += f'[[engines.{name}.profiles]]\ninput = "input"\nmin = [1, 3, 32, 32]\nopt = [4, 3, 32, 32]\n'
        recipe += "max = [8, 3, 32, 32]\n"
        engines.append(name)
    (ws / "trtls.toml").write_text(recipe)
    return ws, engines


def facts_of(ws: Path, engine: str, evs: list[Any]) -> dict[str, Any]:
    """The facts the history records for a build (similar_builds.model_facts), from its `build_started` event."""
    started = next(e for e in evs if e.type == "build_started")
    return {
        "builder": f"{started.environment.module} {started.environment.version}",
        "device": started.environment.device_name,
        "onnxBytes": onnx_bytes(str(ws / "models" / f"{engine}.onnx")),
        "layers": started.network.layers,
        "profiles": len(started.optimization_profiles),
    }


def judge_similar(builds: dict[str, list[list[Any]]], facts: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Each engine with no history of its own, estimated from the other engines' builds."""
    rows = []
    for engine, its in builds.items():
        others = [(facts[o], [(span(b)[1] - span(b)[0]) / NS for b in bs]) for o, bs in builds.items() if o != engine]
        scaled = similar(facts[engine], others)
        for k, evs in enumerate(its):
            t0, t1 = span(evs)
            for share in SHARES:
                elapsed = share * (t1 - t0) / NS
                truth = (t1 - t0) / NS - elapsed
                found = estimate_from_similar(scaled, elapsed)
                point, low, high, _ = found if found else (None, None, None, 0)
                rows.append({"engine": engine, "build": k, "share": share, "lengthS": round((t1 - t0) / NS, 3),
                             "truthS": round(truth, 3), "similarConfigs": len(scaled),
                             "estimateS": None if point is None else round(point, 3),
                             "low": None if low is None else round(low, 3),
                             "high": None if high is None else round(high, 3)})  # fmt: skip
    return rows


def similar_summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    known = [r for r in rows if r["estimateS"] is not None]
    errors = [abs(r["estimateS"] - r["truthS"]) for r in known]
    relative = [abs(r["estimateS"] - r["truthS"]) / r["lengthS"] for r in known]
    return {
        "points": len(rows),
        "noEstimate": len(rows) - len(known),
        "medianAbsErrorS": round(statistics.median(errors), 3) if errors else None,
        "medianAbsErrorPct": round(100 * statistics.median(relative), 1) if relative else None,
        "intervalHeld": f"{sum(r['low'] <= r['truthS'] <= r['high'] for r in known)}/{len(known)}",
    }


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--builds", type=int, default=3)
    ap.add_argument("--keep", type=Path, help="keep each build's event stream here (ENGINE-N.jsonl)")
    ap.add_argument("--replay", type=Path, help="judge the streams a --keep run left, without building")
    ap.add_argument("--no-similar", action="store_true", help="skip the part with no history (similar builds)")
    ap.add_argument("--similar-only", action="store_true", help="only the part with no history (similar builds)")
    args = ap.parse_args()
    n = 2 if args.quick else args.builds
    parent = Path(tempfile.mkdtemp(prefix="trtls-bench-time-left-"))
    figures, every, per_engine = [], [], {}
    if args.replay:
        engines_by_ws = [(args.replay, sorted({p.name.rsplit("-", 1)[0] for p in args.replay.glob("*.jsonl")}))]
    else:
        engines_by_ws = workspaces(parent)
    for ws, engines in [] if args.similar_only else engines_by_ws:
        for engine in engines:
            if args.replay:
                builds = [saved_events(p) for p in sorted(args.replay.glob(f"{engine}-*.jsonl"))]
                n = len(builds)
            else:
                builds = [build_events(ws, engine, args.keep) for _ in range(n)]
            rows = judge(builds)
            every += rows
            s = summary(rows)
            per_engine[engine] = {"summary": s, "rows": rows}
            lengths = sorted(r["lengthS"] for r in rows if r["share"] == SHARES[0])
            figures.append(
                figure(
                    f"{engine}: median |error| at 25/50/75 %",
                    s["medianAbsErrorS"],
                    "s",
                    detail=f"{s['medianAbsErrorPct']} % of the build · builds {lengths} s · interval held "
                    f"{s['intervalHeld']} · clock alone {s['clockMedianAbsErrorS']} s · phases without steps "
                    f"{s['phasesOnlyMedianAbsErrorS']} s · paced {s['pacedMedianAbsErrorS']} s · by share "
                    f"{s['byShare']}",
                )
            )
    similar_rows: list[dict[str, Any]] = []
    if not args.replay and not args.no_similar:
        ws, engines = similar_workspace(parent)
        by_engine = {engine: [build_events(ws, engine, args.keep) for _ in range(n)] for engine in engines}
        facts = {engine: facts_of(ws, engine, by_engine[engine][0]) for engine in engines}
        similar_rows = judge_similar(by_engine, facts)
        s = similar_summary(similar_rows)
        lengths = {e: sorted(round((span(b)[1] - span(b)[0]) / NS, 2) for b in bs) for e, bs in by_engine.items()}
        figures.append(
            figure(
                "no history: from similar builds, median |error| at 25/50/75 %",
                s["medianAbsErrorS"],
                "s",
                detail=f"{s['medianAbsErrorPct']} % of the build · interval held {s['intervalHeld']} · no estimate "
                f"{s['noEstimate']}/{s['points']} · builds {lengths} s · layers "
                f"{ {e: f['layers'] for e, f in facts.items()} }",
            )
        )
    if every:
        total = summary(every)
        figures.insert(
            0,
            figure(
                "all engines: median |error| at 25/50/75 %",
                total["medianAbsErrorS"],
                "s",
                detail=f"{total['medianAbsErrorPct']} % of the build · interval held {total['intervalHeld']} · "
                f"clock alone {total['clockMedianAbsErrorS']} s · phases without steps "
                f"{total['phasesOnlyMedianAbsErrorS']} s · paced {total['pacedMedianAbsErrorS']} s · no estimate "
                f"{total['noEstimate']}/{total['points']}",
            ),
        )
    emit(
        {
            "title": "time left: accuracy on real builds",
            "figures": figures,
            "engines": per_engine,
            "similar": {"summary": similar_summary(similar_rows) if similar_rows else None, "rows": similar_rows},
            "date": time.strftime("%Y-%m-%d"),
            "builds": n,
        },
        args.json,
    )
    shutil.rmtree(parent, ignore_errors=True)


if __name__ == "__main__":
    main()
