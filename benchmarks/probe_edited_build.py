"""A build right after an edit to the recipe, this trtls against an older one in the same interleaved rounds, with the
bare TensorRT-RTX script beside them: `--mode miss` (an empty store: the edit's build) and `--mode hit` (the store holds
the key). `--edit engine` (the default) edits the engine's own job (its output: the same key, `_common.edit_recipe`):
the fast path's memo no longer holds, so the engine key is known only once the recipe is loaded; since 8aea05c the
worker starts before that and a hit kills it unused. `--edit comment` adds a comment: the engine's view of the recipe is
the same (builds/avoidance/recipe_view.py), so a miss is known before the recipe loads and the last job goes ahead, and
a hit starts no worker. This probe says what each gives a miss and costs a hit. Not a `run_all` benchmark:
`bench_cli_fixed_cost --store retuned|edited` carries the misses' figures; this one adds the hits'.

Usage: python benchmarks/probe_edited_build.py --baseline DIR [--mode hit|miss] [--edit engine|comment] [--rounds N]
(DIR holds the older trtls's `server/`, e.g. from `git archive REV server`.)
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import edit_recipe, workspace

HERE = Path(__file__).resolve().parent
SAID = {"hit": "up to date", "miss": "built in"}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--baseline", type=Path, required=True)
    ap.add_argument("--mode", choices=tuple(SAID), default="hit")
    ap.add_argument("--edit", choices=("engine", "comment"), default="engine")
    ap.add_argument("--rounds", type=int, default=10)
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="trtls-probe-edited-"))
    env0 = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env0["PYTHONPYCACHEPREFIX"] = str(root / "pycache")
    arms: dict[str, tuple[Path | None, dict[str, str]]] = {}
    for name, server in (("now", HERE.parent / "server"), ("baseline", args.baseline / "server")):
        ws = workspace(root, f"ws-{name}")
        arms[name] = (ws, {**env0, "PYTHONPATH": str(server), "TRTLS_STORE": str(root / f"store-{name}")})
    arms["bare"] = (None, {**env0, "TRTLS_STORE": "off"})
    onnx = root / "ws-now" / "models" / "demo.onnx"

    def run(name: str, check: bool) -> float:
        ws, env = arms[name]
        if ws is None:
            cmd = [sys.executable, str(HERE / "_bare_build.py"), str(onnx), str(root / "bare.engine")]
        else:
            edit_recipe(ws / "trtls.toml", "demo" if args.edit == "engine" else None)  # outside the timing
            if args.mode == "miss":
                shutil.rmtree(env["TRTLS_STORE"], ignore_errors=True)
            cmd = [sys.executable, "-m", "trtls", "build", str(ws), "--engine", "demo"]
        t0 = time.perf_counter()
        done = subprocess.run(cmd, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        if done.returncode != 0:
            raise RuntimeError(f"{name} exited {done.returncode}: {done.stderr[-1000:]}")
        if check and ws is not None and SAID[args.mode] not in done.stdout:
            raise RuntimeError(f"{name}: not a {args.mode}: {done.stdout[-500:]}")
        return wall

    names = list(arms)
    got: dict[str, list[float]] = {n: [] for n in names}
    for r in range(-1, args.rounds):  # round -1: the warm-up (and a hit's first build)
        order = names[r % len(names) :] + names[: r % len(names)]
        walls = {n: run(n, r >= 0) for n in order}
        if r >= 0:
            for n, w in walls.items():
                got[n].append(w)
            print(
                f"  round {r + 1}/{args.rounds} ({order[0]} first): "
                + ", ".join(f"{n} {walls[n] * 1000:.0f} ms" for n in names),
                flush=True,
            )
    print(f"== an edited recipe ({args.edit}), store {args.mode}: {args.rounds} interleaved rounds ==")
    for n in names:
        ratios = [w / b for w, b in zip(got[n], got["bare"], strict=True)]
        print(f"  {n}: median {statistics.median(got[n]) * 1000:.0f} ms, /bare {statistics.median(ratios):.3f} ×")
    diffs = [(a - b) * 1000 for a, b in zip(got["now"], got["baseline"], strict=True)]
    faster = sum(d < 0 for d in diffs)
    print(f"  now − baseline: median {statistics.median(diffs):+.0f} ms a round; faster in {faster} of {len(diffs)}")
    shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
