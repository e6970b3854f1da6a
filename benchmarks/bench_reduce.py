"""`trtls reduce` on the real cases: trials used against the issue's bound (2·⌈log2 nodes⌉ for the bisections, the
linear pass counted apart), and the stop of a reduction (SIGINT during a trial → process exit) side by side with the
stop of a single `trtls build` of the same engine, interleaved in one run.

Usage: python benchmarks/bench_reduce.py [--rounds 3] [--json out.json]
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import emit, figure, parser, workspace

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
SMEM = "[engines.demo.builder]\noptimization_level = 3\n"
ENV = {**os.environ, "TRTLS_STORE": "off"}


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


def _stop_after(cmd: list[str], marker: str | None, delay_s: float) -> float:
    """Start `cmd`, wait for a stdout line containing `marker` (or `delay_s`), SIGINT it; seconds to exit."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=ENV)
    assert proc.stdout is not None
    if marker is not None:
        for line in proc.stdout:
            if marker in line:
                break
    time.sleep(delay_s)
    t0 = time.monotonic()
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=120)
    return time.monotonic() - t0


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    figures, notes = [], []
    for name, ws, engine in (
        ("tactic_shared_memory_kib = 32", _smem_ws(), "demo"),
        ("silero-vad If", _vad_ws(), "vad"),
    ):
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
    smem = _smem_ws()
    reduce_cmd = [sys.executable, "-m", "trtls", "reduce", str(smem), "--engine", "demo"]
    build_cmd = [sys.executable, "-m", "trtls", "build", str(smem), "--engine", "demo"]
    red_s, build_s = [], []
    for _ in range(args.rounds):  # interleaved: the same machine state for both
        red_s.append(_stop_after(reduce_cmd, " outputs ", 1.0))  # inside the bisection's next trial
        build_s.append(_stop_after(build_cmd, None, 2.5))  # inside the build (it fails at ~6 s here)
    ratio = statistics.median(red_s) / statistics.median(build_s)
    figures.append(figure(
        "stop of a reduction → exit (median)", round(statistics.median(red_s), 3), "s",
        "the stop of a build of the same engine + a bounded margin", None,
        f"reduction {[round(x, 2) for x in red_s]} s vs build {[round(x, 2) for x in build_s]} s, "
        f"ratio of medians {ratio:.2f} ({args.rounds} interleaved rounds)",
    ))  # fmt: skip
    notes.append(f"load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    emit({"title": "trtls reduce: trials and stop", "figures": figures, "notes": notes}, args.json)


if __name__ == "__main__":
    main()
