"""`trtls reduce` beside `polygraphy debug reduce` (bisect) on the same failing models, on this machine (issue 30).

Usage: python benchmarks/bench_reduce_vs_polygraphy.py [--cases vad,ppocr,...] [--json out.json]

Each case is a model whose TensorRT-RTX build fails: two real third-party models from registry packages (silero-vad's
If export, TensorRT-RTX's graphScope assertion; PaddleOCR's PP-OCRv4 detector from rapidocr-onnxruntime and magika's
model, each with 32 KiB of tactic shared memory, a Myelin CHECK) and generated ones (a two-output model whose failing
LayerNormalization branch ends before the other output's; a 24-node chain whose Det the parser rejects; a chain whose
TopK exceeds TensorRT's k limit, a failure trtls does not classify, reduced by both with the same `--fail-regex`).

trtls: `trtls build DIR --engine E` first, as the user who is told the build failed has run it (not counted: the
reduction reuses that failed build as its first trial when its engine key is the recipe's, `reusedBuild`), then
`trtls reduce DIR --engine E --json` (its own "same failure", no pattern, except the TopK case). Polygraphy:
`polygraphy debug reduce MODEL --mode bisect --model-input-shapes … --check python _rtx_check.py
polygraphy_debug.onnx … --fail-regex PATTERN` — `_rtx_check.py` is the same build as trtls's trial (TensorRT-RTX,
optimization level 3, the recipe's shared-memory setting, the opt shapes) in a plain script, TensorRT's errors on
stderr. Recorded for both: trials (trtls: builds, `trialsBuilt`; Polygraphy: runs of the check, counted by the check
itself), wall time, the final model's nodes (all, and not `Constant`, counted from the file each wrote), and "still
fails the same way": the final model built again by `_rtx_check.py`, outside both tools, and its stderr matched
against the case's pattern (trtls's minimal model with the profiles its record gives).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, emit, figure, parser

CHECK = Path(__file__).resolve().parent / "_rtx_check.py"
ENV = {**os.environ, "TRTLS_STORE": "off"}
POLYGRAPHY = [str(Path(sys.executable).parent / "polygraphy")]  # the venv's console script
SMEM_RE = r"CHECK_GE\(smem_limit, kMinSharedMemory - 1024\) failed"


def _recipe(engine: str, onnx_file: str, shapes: dict[str, list[list[int]]], smem: bool) -> str:
    """A recipe of one engine: one profile, each input's [min, opt, max]."""
    lines = [f"[engines.{engine}]", f'onnx = "{onnx_file}"', f'output = "build/{engine}.engine"']
    if smem:
        lines += [f"[engines.{engine}.builder]", "memory_pool_limits = { tactic_shared_memory_kib = 32 }"]
    lines.append(f"[[engines.{engine}.profiles]]")
    for name, (lo, opt, hi) in shapes.items():
        lines.append(f"inputs.{name} = {{ min = {lo}, opt = {opt}, max = {hi} }}")
    return "\n".join(lines) + "\n"


def cases(parent: Path) -> list[dict[str, Any]]:
    from tests.onnx_files.third_party import fetch_all
    from tests.triage.test_reduce_cases import _chain, _two_outputs
    from tests.triage.test_reduce_search import TWO_OUTPUTS_DEPTH

    models = fetch_all()
    out = []

    def case(name: str, source: str, model: Any, shapes: dict[str, list[list[int]]], pattern: str, *,
             smem: bool = False, fail_regex: bool = False) -> None:  # fmt: skip
        ws = parent / name
        ws.mkdir()
        if isinstance(model, Path):
            shutil.copyfile(model, ws / "m.onnx")
        else:
            model(ws / "m.onnx")
        (ws / "trtls.toml").write_text(_recipe("m", "m.onnx", shapes, smem))
        out.append({"name": name, "source": source, "ws": ws, "shapes": shapes, "pattern": pattern, "smem": smem,
                    "fail_regex": fail_regex})  # fmt: skip

    vad = {"input": [[1, 512], [1, 512], [4, 512]], "state": [[2, 1, 128], [2, 1, 128], [2, 4, 128]]}
    case("silero-vad If", "third-party: silero-vad 6.2.3 silero_vad_16k_op15.onnx", models["silero_vad_if"], vad,
         r"Assertion tScope.getType\(\) != ScopeType::kUNDEFINED failed")  # fmt: skip
    page = {"x": [[1, 3, 32, 32], [1, 3, 320, 320], [1, 3, 640, 640]]}
    case("PP-OCRv4 det, smem 32 KiB", "third-party: rapidocr-onnxruntime 1.4.4 ch_PP-OCRv4_det_infer.onnx",
         models["ppocr_det"], page, SMEM_RE, smem=True)  # fmt: skip
    case("magika, smem 32 KiB", "third-party: magika 1.0.3 standard_v3_3/model.onnx", models["magika"],
         {"bytes": [[1, 2048], [1, 2048], [8, 2048]]}, SMEM_RE, smem=True)  # fmt: skip
    rows = {"x": [[1, 16, 64], [2, 16, 64], [4, 16, 64]]}
    case("two outputs, LayerNorm branch, smem 32 KiB", "generated (tests/triage/test_reduce_cases._two_outputs)",
         lambda p: _two_outputs(p, depth=TWO_OUTPUTS_DEPTH), rows, SMEM_RE, smem=True)  # fmt: skip
    det = [("Relu", f"r{i}") if i % 2 else ("Sigmoid", f"s{i}") for i in range(16)]
    det += [("Det", "det")] + [("Neg", f"n{i}") if i % 2 else ("Abs", f"a{i}") for i in range(7)]
    case("24-node chain, Det rejected by the parser", "generated (tests/triage/test_reduce_cases._chain)",
         lambda p: _chain(p, det, ["N", 4, 4], ["N"]), {"x": [[1, 4, 4], [2, 4, 4], [4, 4, 4]]},
         r"operator: Det \(checkDet\): UNSUPPORTED_NODE")  # fmt: skip
    topk = [("Relu", f"r{i}") if i % 2 else ("Sigmoid", f"s{i}") for i in range(12)]
    topk += [("TopK", "topk")] + [("Neg", f"n{i}") if i % 2 else ("Abs", f"a{i}") for i in range(6)]
    case("19-node chain, TopK k over the limit (--fail-regex)", "generated (tests/triage/test_reduce_cases._chain)",
         lambda p: _chain(p, topk, ["N", 8192], ["N", 5000]), {"x": [[1, 8192], [2, 8192], [4, 8192]]},
         r"K exceeds the maximum value allowed \(3840\)", fail_regex=True)  # fmt: skip
    return out


def _nodes(path: Path) -> tuple[int, int]:
    import onnx

    nodes = onnx.load(str(path), load_external_data=False).graph.node
    return len(nodes), sum(1 for n in nodes if n.op_type != "Constant")


def _check(model: Path, c: dict[str, Any], profile: dict[str, Any] | None = None) -> bool:
    """Built again outside both tools: does it fail, with the case's pattern in TensorRT's errors?"""
    cmd = [sys.executable, str(CHECK), str(model)] + (["--smem", "32"] if c["smem"] else [])
    if profile:
        cmd += ["--profile", json.dumps(profile)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    return proc.returncode != 0 and re.search(c["pattern"], proc.stderr + proc.stdout) is not None


def run_trtls(c: dict[str, Any]) -> dict[str, Any]:
    user = [sys.executable, "-m", "trtls", "build", str(c["ws"]), "--engine", "m"]  # the user's failed build
    subprocess.run(user, capture_output=True, text=True, env=ENV, timeout=3600)
    cmd = [sys.executable, "-m", "trtls", "reduce", str(c["ws"]), "--engine", "m", "--json"]
    if c["fail_regex"]:
        cmd += ["--fail-regex", c["pattern"]]
    t0 = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=ENV, timeout=3600)
    wall = time.monotonic() - t0
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith('{"kind": "reduction"')]
    if not lines:
        return {"error": proc.stderr[-600:], "wall_s": round(wall, 1)}
    r = json.loads(lines[-1])
    minimal = Path(r["minimalPath"]) if r.get("minimalPath") else None
    nodes = _nodes(minimal) if minimal else _nodes(c["ws"] / "m.onnx")
    profile = None
    profiles = (r.get("minimal") or {}).get("profiles") or []
    if profiles:
        profile = {e["input"]: {k: e[k] for k in ("min", "opt", "max")} for e in profiles[0]["inputs"]}
    return {
        "outcome": r["outcome"],
        "cause": r.get("causeText"),
        "trials": r["trialsBuilt"],
        "trials_by_step": r.get("trialsByStep"),
        "reused_build": r.get("reusedBuild"),
        "wall_s": round(wall, 1),
        "nodes": nodes[0],
        "compute_nodes": nodes[1],
        "node_names": (r.get("minimal") or {}).get("nodeNames"),
        "still_fails": _check(minimal, c, profile) if minimal else None,
        "exit": proc.returncode,
    }


def run_polygraphy(c: dict[str, Any]) -> dict[str, Any]:
    ws: Path = c["ws"]
    work = ws / "polygraphy"
    work.mkdir()
    count = work / "checks.txt"
    shapes = [f"{name}:{json.dumps(opt).replace(' ', '')}" for name, (_, opt, _) in c["shapes"].items()]
    check = [sys.executable, str(CHECK), "polygraphy_debug.onnx", "--count", str(count)]
    check += ["--smem", "32"] if c["smem"] else []
    cmd = [*POLYGRAPHY, "debug", "reduce", str(ws / "m.onnx"), "-o", "reduced.onnx", "--mode", "bisect",
           "--model-input-shapes", *shapes, "--fail-regex", c["pattern"], "--check", *check]  # fmt: skip
    t0 = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=work, timeout=3600)
    wall = time.monotonic() - t0
    trials = len(count.read_text().splitlines()) if count.is_file() else 0
    reduced = work / "reduced.onnx"
    if proc.returncode != 0 or not reduced.is_file():
        tail = (proc.stderr or proc.stdout)[-600:]
        return {"error": tail, "trials": trials, "wall_s": round(wall, 1), "exit": proc.returncode}
    nodes = _nodes(reduced)
    return {
        "trials": trials,
        "wall_s": round(wall, 1),
        "nodes": nodes[0],
        "compute_nodes": nodes[1],
        "still_fails": _check(reduced, c),
        "exit": proc.returncode,
    }


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--cases", help="comma-separated name prefixes (default: every case)")
    args = ap.parse_args()
    parent = Path(tempfile.mkdtemp(prefix="trtls-bench-vs-polygraphy-"))
    chosen = cases(parent)
    if args.cases:
        chosen = [c for c in chosen if any(c["name"].startswith(p) for p in args.cases.split(","))]
    figures, notes, raw = [], [], []
    pinned = _pinned()
    for c in chosen:
        original = _nodes(c["ws"] / "m.onnx")
        t = run_trtls(c)
        p = run_polygraphy(c)
        raw.append({"case": c["name"], "source": c["source"], "nodes": original, "trtls": t, "polygraphy": p})
        print(json.dumps(raw[-1], default=str), file=sys.stderr, flush=True)
        if c["name"] in pinned and p.get("trials") != pinned[c["name"]]:
            notes.append(f"{c['name']}: Polygraphy spent {p.get('trials')} checks, the tests pin {pinned[c['name']]} "
                         "(tests/triage/test_reduce_search.py POLYGRAPHY_*_CHECKS): update them")  # fmt: skip
        ok = (
            "error" not in t
            and t["still_fails"] is True
            and ("error" in p or (t["compute_nodes"] <= p["compute_nodes"] and t["trials"] <= p["trials"]))
        )
        figures.append(figure(
            f"{c['name']} ({original[1]} nodes)", f"trtls {_said(t)} · polygraphy {_said(p)}", "",
            "trtls: a model at most as large as Polygraphy's in no more trials", ok,
            f"{c['source']}; trtls {t.get('outcome')}: {t.get('node_names')}",
        ))  # fmt: skip
    notes.append(f"load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; workspaces in {parent}")
    emit({"title": "trtls reduce vs polygraphy debug reduce (bisect)", "figures": figures, "notes": notes,
          "raw": raw}, args.json)  # fmt: skip


def _pinned() -> dict[str, int]:
    """The cases whose Polygraphy checks tests/triage/test_reduce_search.py pins (trtls's trials stay within them)."""
    from tests.triage.test_reduce_search import POLYGRAPHY_MAGIKA_CHECKS, POLYGRAPHY_TWO_OUTPUTS_CHECKS

    return {
        "magika, smem 32 KiB": POLYGRAPHY_MAGIKA_CHECKS,
        "two outputs, LayerNorm branch, smem 32 KiB": POLYGRAPHY_TWO_OUTPUTS_CHECKS,
    }


def _said(r: dict[str, Any]) -> str:
    if "error" in r:
        return f"error after {r.get('trials', '?')} trials, {r['wall_s']} s"
    fails = {True: "still fails", False: "does NOT fail the same way", None: "no model"}[r["still_fails"]]
    return f"{r['trials']} trials, {r['wall_s']} s, {r['compute_nodes']} nodes ({r['nodes']} with Constant), {fails}"


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
