"""`trtls reduce` on the real cases: trials used against the issue's bound (2·⌈log2 nodes⌉ for the bisections, the
linear pass counted apart), and the stop of a reduction (SIGINT during a trial → process exit) side by side with the
stop of a single `trtls build` of the same engine, interleaved in one run.

Usage: python benchmarks/bench_reduce.py [--rounds 3] [--parts trials,stop] [--baseline DIR] [--json out.json]

`--parts stop`: only the stop comparison. `--baseline DIR`: also stop an older trtls's reduction in the same rounds
(DIR holds its `server/` folder, e.g. from `git archive REV server`).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import emit, figure, parser, workspace

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
SMEM = "[engines.demo.builder]\noptimization_level = 3\n"
ENV = {**os.environ, "TRTLS_STORE": "off"}
TRTLS = [sys.executable, "-m", "trtls"]


def _smem_ws() -> Path:
    ws = workspace(name="smem")
    recipe = ws / "trtls.toml"
    recipe.write_text(
        recipe.read_text().replace(SMEM, SMEM + "memory_pool_limits = { tactic_shared_memory_kib = 32 }\n")
    )
    return ws


def _vad_ws() -> Path:
    from tests.onnx_files.third_party import fetch_all

    ws = workspace(name="vad")
    shutil.copyfile(fetch_all()["silero_vad_if"], ws / "vad.onnx")
    (ws / "trtls.toml").write_text(
        '[engines.vad]\nonnx = "vad.onnx"\noutput = "build/vad.engine"\n\n[[engines.vad.profiles]]\n'
        "inputs.input = { min = [1, 512], opt = [1, 512], max = [4, 512] }\n"
        "inputs.state = { min = [2, 1, 128], opt = [2, 1, 128], max = [2, 4, 128] }\n"
    )
    return ws


def _reduce(ws: Path, engine: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-m", "trtls", "reduce", str(ws), "--engine", engine, "--json"],
        capture_output=True, text=True, env=ENV, check=False,
    )  # fmt: skip
    return json.loads([ln for ln in out.stdout.splitlines() if ln.startswith("{")][-1])


def _stop_after(cmd: list[str], marker: str, delay_s: float, ended: str, env: dict[str, str] = ENV) -> dict[str, Any]:
    """Start `cmd`, wait for a stdout line containing `marker`, then `delay_s`, SIGINT it. Returns the seconds from
    the SIGINT to the process's exit (`stop`), from the last line starting with `ended` (the line a build or a trial
    prints when it has ended) to the exit (`tail`: what follows the stopped build — the record, the process's own
    exit; None when none ended after the SIGINT), and the exit code. A process that ended before the SIGINT was sent
    (`missed`) was not stopped: its `stop` is None, never a figure."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    assert proc.stdout is not None
    for line in proc.stdout:
        if marker in line:
            break
    time.sleep(delay_s)
    if proc.poll() is not None:  # ended on its own before the stop
        proc.stdout.read()
        return {"stop": None, "tail": None, "code": proc.returncode, "missed": True}
    t0 = time.monotonic()
    proc.send_signal(signal.SIGINT)
    last = None
    for line in proc.stdout:
        if line.startswith(ended):
            last = time.monotonic()
    code = proc.wait(timeout=120)
    t1 = time.monotonic()
    if code != 130:  # it ended on its own while the signal was on its way: not a stop either
        return {"stop": None, "tail": None, "code": code, "missed": True}
    return {"stop": t1 - t0, "tail": None if last is None else t1 - last, "code": code, "missed": False}


def _latest_record(ws: Path) -> dict[str, Any]:
    folders = sorted((ws / ".trtls" / "reduce").iterdir(), key=lambda p: p.stat().st_mtime)
    return json.loads((folders[-1] / "result.json").read_text())


def _med(rounds: list[dict[str, Any]], key: str) -> float | None:
    values = [r[key] for r in rounds if r[key] is not None]
    return round(statistics.median(values), 3) if values else None


def stop_figures(rounds_n: int, baseline: Path | None) -> tuple[list[dict[str, Any]], list[str]]:
    """SIGINT inside a bisection trial of `trtls reduce` (0.1 s after its first trial's line: inside the second
    trial's build, whatever the host's speed — a fixed second after the start found the whole reduction done on a
    quicker CPU, 2026-12-07) against SIGINT inside a `trtls build` of the same engine (at its first progress line,
    + 0.1 s: inside the builder), interleaved. A round that ended before its stop is counted, never a figure."""
    smem = _smem_ws()
    reduce = ["reduce", "--engine", "demo"]
    runs: list[tuple[str, list[str], str, float, str, dict[str, str], Path]] = [
        ("reduce", [*TRTLS, *reduce, str(smem)], "  trial ", 0.1, "  trial ", ENV, smem),
        ("build", [*TRTLS, "build", "--engine", "demo", str(smem)], "▶ Building engine", 0.1, "demo: ", ENV, smem),
    ]
    if baseline is not None:  # an older trtls in the same rounds (its own workspace and evidence)
        old = _smem_ws()
        old_env = {**ENV, "PYTHONPATH": str(baseline / "server")}
        runs.insert(1, ("baseline reduce", [*TRTLS, *reduce, str(old)], "  trial ", 0.1, "  trial ", old_env, old))
    got: dict[str, list[dict[str, Any]]] = {name: [] for name, *_ in runs}
    for _ in range(rounds_n):  # interleaved: the same machine state for each
        for name, cmd, marker, delay, ended, env, ws in runs:
            r = _stop_after(cmd, marker, delay, ended, env)
            if "reduce" in name:
                rec = _latest_record(ws)
                r["during_trial"] = not r["missed"] and rec["stoppedDuringTrial"] is not None
            got[name].append(r)
    figures, notes = [], []
    build = got["build"]
    for name, rounds in got.items():
        stops = [None if r["stop"] is None else round(r["stop"], 3) for r in rounds]
        tails = [None if r["tail"] is None else round(r["tail"], 3) for r in rounds]
        codes = [r["code"] for r in rounds]
        detail = f"SIGINT → exit {stops} s; the stopped build's end → exit {tails} s; exit codes {codes}"
        if "reduce" in name:
            detail += f"; a trial was building at the stop in {sum(r['during_trial'] for r in rounds)}/{len(rounds)}"
        if missed := sum(r["missed"] for r in rounds):
            detail += f"; {missed} of {len(rounds)} ended before their stop (not stops: left out)"
        figures.append(figure(f"stop of a {name} → exit (median)", _med(rounds, "stop"), "s", None, None, detail))
    for name in (n for n in got if "reduce" in n):
        red = got[name]
        red_stops = [r["stop"] for r in red if r["stop"] is not None]
        build_stops = [r["stop"] for r in build if r["stop"] is not None]
        # no stop measured on either side: no ratio (n/a), never one made of rounds that were not stops
        ratio = statistics.median(red_stops) / statistics.median(build_stops) if red_stops and build_stops else None
        red_tail, build_tail = _med(red, "tail"), _med(build, "tail")
        figures.append(figure(
            f"{name} stop / build stop (ratio of medians)", None if ratio is None else round(ratio, 2), "",
            "the stop of a build of the same engine + a bounded margin", None,
            f"after the stopped build has ended: {name} {red_tail} s vs build {build_tail} s (medians); "
            f"{rounds_n} interleaved rounds",
        ))  # fmt: skip
    if any(r["code"] != 130 for r in build):
        notes.append("a build round ended before its stop (exit ≠ 130): its figure is not a stop")
    return figures, notes


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--parts", default="trials,stop", help="which measurements (comma-separated: trials, stop)")
    ap.add_argument("--baseline", type=Path, help="a folder holding an older trtls's server/: its reduction's stop too")
    args = ap.parse_args()
    parts = args.parts.split(",")
    figures, notes = [], []
    for name, ws, engine in (
        ("tactic_shared_memory_kib = 32", _smem_ws(), "demo"),
        ("silero-vad If", _vad_ws(), "vad"),
    ):
        if "trials" not in parts:
            break
        r = _reduce(ws, engine)
        steps = r["trialsByStep"]
        bisect = steps.get("outputs", 0) + steps.get("inputs", 0)
        linear = steps.get("linear_outputs", 0) + steps.get("linear_inputs", 0)
        figures.append(figure(
            f"{name}: bisection trials", bisect, "", f"≤ {r['bisectBound']} (2·⌈log2 {r['originalNodes']}⌉)",
            bisect <= r["bisectBound"],
            f"{r['originalNodes']} → {(r['minimal'] or {}).get('nodes')} nodes, {r['trialsUsed']} trials in all "
            f"({steps}); linear pass {linear}; outcome {r['outcome']}, cause {r['cause']}",
        ))  # fmt: skip
    if "stop" in parts:
        load = os.getloadavg()[0]
        more, more_notes = stop_figures(args.rounds, args.baseline)
        figures += more
        notes += more_notes
        notes.append(f"load average before the stop rounds: {load:.1f}")
    notes.append(f"load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    emit({"title": "trtls reduce: trials and stop", "figures": figures, "notes": notes}, args.json)


if __name__ == "__main__":
    main()
