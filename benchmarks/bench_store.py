"""The engine store (docs/store.md): what an unchanged build costs, and how many TensorRT builds really run.

All figures from one run, whole processes timed from the outside:
1. an unchanged `trtls build` (a store hit) of `large` and of `demo`, against a bare TensorRT-RTX build of the same
   model in the same run (`_bare_build.py`), interleaved pairs: median ratio hit/bare (targets ≤ 0.03 and ≤ 0.2,
   issue 32), on the fast path (unchanged since the last run) and on the full path (the engine's memo removed, as in
   a fresh checkout: the recipe loaded and checked, the key computed from the warm digest cache);
2. a hit on a ≥ 500 MB ONNX (demo's graph + a 512 MiB initializer) with a warm digest cache: wall seconds of the
   whole `trtls build` process (target ≤ 0.5 s) on the fast path (unchanged since the last run) and on the full
   path (recipe loaded, key computed from the warm digest cache), and with a cold digest cache beside them;
3. a 4-cell matrix (optimization_level 0–3) built once, then one cell changed (3 → 4): TensorRT builds counted in
   the second run (target exactly 1);
4. two `trtls build` processes of one key started together on an empty store: worker processes and processes that
   imported TensorRT, counted (target exactly 1 each);
5. a remote hit over loopback (`remote` part, where nginx is installed: a real nginx WebDAV server, as the tests
   use): each run starts with an empty local store whose remote holds the engine, so `trtls build` fetches the
   entry, verifies it and restores it; interleaved with the bare build, median ratio remote hit/bare, and no
   process imported TensorRT.
Counting uses a sitecustomize on PYTHONPATH that drops a marker per worker start and per TensorRT import.
Usage: python benchmarks/bench_store.py [--pairs N] [--quick] [--json F]
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import emit, figure, parser, workspace

HERE = Path(__file__).resolve().parent
TRTLS = [sys.executable, "-m", "trtls"]
PROBE = """
import os, sys
_d = os.environ.get("TRTLS_BENCH_PROBE_DIR")
if _d:
    _argv = getattr(sys, "orig_argv", [])
    # a worker started parked (builds/worker/parked.py: a build the store may serve) is a worker once it is told to
    # start: it then imports its modules; one a hit ended unstarted loaded nothing
    _parked = "trtls.builds.worker" in _argv and "--parked" in _argv
    if "trtls.builds.worker" in _argv and not _parked:
        open(os.path.join(_d, f"worker-{os.getpid()}"), "w").close()
    def _hook(event, args):
        if _parked and event == "import" and str(args[0]) == "trtls.builds.worker.main":
            open(os.path.join(_d, f"worker-{os.getpid()}"), "w").close()
        if event == "import" and str(args[0]).startswith("tensorrt"):
            open(os.path.join(_d, f"tensorrt-{os.getpid()}"), "w").close()
    sys.addaudithook(_hook)
"""


def with_store(ws: Path, store: Path) -> Path:
    (ws / "trtls.toml").write_text((ws / "trtls.toml").read_text() + f'\n[store]\npath = "{store}"\n')
    return ws


def timed(cmd: list[str], env: dict[str, str] | None = None) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}: {proc.stderr[-1500:]}")
    return wall


def probe_env(folder: Path) -> tuple[dict[str, str], Path]:
    marks = folder / "marks"
    site = folder / "site"
    marks.mkdir(parents=True)
    site.mkdir()
    (site / "sitecustomize.py").write_text(PROBE)
    env = {**os.environ, "TRTLS_BENCH_PROBE_DIR": str(marks), "PYTHONPATH": str(site)}
    return env, marks


def count(marks: Path, kind: str) -> int:
    return len(list(marks.glob(f"{kind}-*")))


def hit_vs_bare(engine: str, pairs: int, root: Path) -> list[dict]:
    ws = with_store(workspace(root, f"ws-{engine}"), root / f"store-{engine}")
    build = [*TRTLS, "build", str(ws), "--engine", engine]
    seed = timed(build)  # the one real build: publishes the engine
    onnx = ws / "models" / f"{engine}.onnx"
    bare = [sys.executable, str(HERE / "_bare_build.py"), str(onnx), str(ws / "build" / f"{engine}.bare.engine")]
    memo = ws / ".trtls" / "engines" / f"{engine}.hit.json"

    def full_path() -> float:
        memo.unlink(missing_ok=True)  # no memo, as in a fresh checkout: the recipe is loaded and the key computed
        return timed(build)

    rows = []
    for i in range(pairs):
        runs = [("hit", lambda: timed(build)), ("bare", lambda: timed(bare)), ("full", full_path)]
        got = {name: run() for name, run in (runs if i % 2 == 0 else runs[::-1])}
        rows.append(got)
        print(
            f"  {engine} pair {i + 1}/{pairs}: hit {got['hit']:.3f} s, full path {got['full']:.3f} s, bare "
            f"{got['bare']:.2f} s",
            flush=True,
        )
    target = {"large": 0.03, "demo": 0.2}[engine]  # issue 32: demo ≤ 0.2 (was 0.25)
    out = []
    for kind, label in (("hit", "unchanged trtls build (store hit)"), ("full", "store hit on the full path (no memo)")):
        ratios = [r[kind] / r["bare"] for r in rows]
        med = statistics.median(ratios)
        out.append(
            figure(
                f"{engine}: {label} / bare TensorRT-RTX build, wall (median)",
                round(med, 4),
                "×",
                f"≤ {target}" if kind == "hit" else "(reported: a fresh checkout's hit; issue 32 measured 0.70)",
                med <= target if kind == "hit" else None,
                f"{pairs} interleaved rounds; {kind} median {statistics.median(r[kind] for r in rows):.3f} s, bare "
                f"median {statistics.median(r['bare'] for r in rows):.2f} s; the first (seeding) build took "
                f"{seed:.1f} s; ratios {min(ratios):.4f}–{max(ratios):.4f}; load average {os.getloadavg()[0]:.1f}",
            )
        )
    return out


def make_big_model(src: Path, dst: Path, mib: int = 512) -> None:
    """demo's graph + one unused float32 initializer of `mib` MiB, inline in the .onnx file."""
    import numpy as np
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(src))
    model.graph.initializer.append(numpy_helper.from_array(np.zeros(mib * 1024 * 1024 // 4, np.float32), "pad"))
    onnx.save(model, str(dst))


def big_hit(root: Path, runs: int) -> list[dict]:
    ws = with_store(workspace(root, "ws-big"), root / "store-big")
    big = ws / "models" / "demo.onnx"
    make_big_model(big, big)
    old = time.time_ns() - 10 * 10**9  # the digest cache does not keep files modified within 2 s ("racy")
    os.utime(big, ns=(old, old))
    size = big.stat().st_size
    build = [*TRTLS, "build", str(ws), "--engine", "demo"]
    timed(build)  # the real build (publishes) and warms the digest cache
    memo = ws / ".trtls" / "engines" / "demo.hit.json"
    fast = [timed(build) for _ in range(runs)]  # unchanged since the last run: the fast path (memo)
    full = []
    for _ in range(runs):  # the memo gone: the full path, recipe loaded and key computed from the warm digest cache
        memo.unlink(missing_ok=True)
        full.append(timed(build))
    cold = []
    for _ in range(max(1, runs // 2)):  # nothing remembered: the model hashed again
        memo.unlink(missing_ok=True)
        (ws / ".trtls" / "digests.json").unlink(missing_ok=True)
        cold.append(timed(build))
    med = statistics.median(fast)
    return [
        figure(
            f"hit on a {size / 1e6:.0f} MB ONNX, unchanged since the last run (warm digest cache + memo): whole "
            "trtls build process (median)",
            round(med, 3),
            "s",
            "≤ 0.5",
            med <= 0.5,
            f"{runs} runs, {min(fast):.3f}–{max(fast):.3f} s; load average {os.getloadavg()[0]:.1f}",
        ),
        figure(
            f"hit on a {size / 1e6:.0f} MB ONNX, full path (recipe loaded, key from the warm digest cache), median",
            round(statistics.median(full), 3),
            "s",
            "≤ 0.5",
            statistics.median(full) <= 0.5,
            f"{runs} runs, {min(full):.3f}–{max(full):.3f} s; with a cold digest cache (the model hashed again): "
            f"median {statistics.median(cold):.3f} s",
        ),
    ]


MATRIX = """
[engines.demo.matrix]
output = "build/demo-o{optimization_level}.engine"
optimization_level = [0, 1, 2, 3]
"""


def matrix_one_changed(root: Path) -> list[dict]:
    ws = with_store(workspace(root, "ws-matrix"), root / "store-matrix")
    (ws / "trtls.toml").write_text((ws / "trtls.toml").read_text() + MATRIX)
    cmd = [*TRTLS, "build", str(ws), "--engine", "demo", "--matrix"]
    env1, marks1 = probe_env(root / "probe-matrix-1")
    timed(cmd, env1)
    text = (ws / "trtls.toml").read_text()
    (ws / "trtls.toml").write_text(
        text.replace("optimization_level = [0, 1, 2, 3]", "optimization_level = [0, 1, 2, 4]")
    )
    env2, marks2 = probe_env(root / "probe-matrix-2")
    timed(cmd, env2)
    n = count(marks2, "tensorrt")
    return [
        figure(
            "4-cell matrix, one cell changed: TensorRT builds in the second run",
            n,
            "",
            "= 1",
            n == 1,
            f"worker processes {count(marks2, 'worker')}; the first run built {count(marks1, 'tensorrt')} cells",
        )
    ]


def two_at_once(root: Path) -> list[dict]:
    store = root / "store-two"
    a = with_store(workspace(root, "ws-two-a"), store)
    b = with_store(workspace(root, "ws-two-b"), store)
    env, marks = probe_env(root / "probe-two")
    procs = [
        subprocess.Popen(
            [*TRTLS, "build", str(ws), "--engine", "demo"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        for ws in (a, b)
    ]
    outs = [p.communicate() for p in procs]
    if any(p.returncode for p in procs):
        raise RuntimeError(f"a build failed: {outs}")
    workers, imports = count(marks, "worker"), count(marks, "tensorrt")
    return [
        figure(
            "two simultaneous builds of one key: workers that ran TensorRT",
            imports,
            "",
            "= 1",
            imports == 1 and workers == 1,
            f"worker processes started {workers}; both exited 0",
        )
    ]


def remote_hit(engine: str, pairs: int, root: Path) -> list[dict]:
    """A store hit served from a remote (nginx WebDAV on loopback) into an empty local store, vs a bare build."""
    sys.path.insert(0, str(HERE.parent))
    from tests.store.nginx_dav import nginx_binary, start_dav

    if nginx_binary() is None:
        return [figure(f"{engine}: remote hit over loopback", None, "", "stated", None, "not measured: no nginx here")]
    server = start_dav(root / f"nginx-{engine}")
    try:
        ws = workspace(root, f"ws-remote-{engine}")
        recipe = (ws / "trtls.toml").read_text()

        def store_at(local: Path) -> None:
            (ws / "trtls.toml").write_text(recipe + f'\n[store]\npath = "{local}"\nremote = "{server.url}"\n')

        store_at(root / f"store-remote-{engine}-seed")
        build = [*TRTLS, "build", str(ws), "--engine", engine]
        seed = timed(build)  # the one real build: publishes to the local store and sends it on to the remote
        onnx = ws / "models" / f"{engine}.onnx"
        bare = [sys.executable, str(HERE / "_bare_build.py"), str(onnx), str(ws / "build" / f"{engine}.bare.engine")]
        rows, imports = [], 0
        for i in range(pairs):
            store_at(root / f"store-remote-{engine}-{i}")  # an empty local store: only the remote holds the engine
            (ws / ".trtls" / "engines" / f"{engine}.hit.json").unlink(missing_ok=True)
            env, marks = probe_env(root / f"probe-remote-{engine}-{i}")
            order = [("hit", build), ("bare", bare)] if i % 2 == 0 else [("bare", bare), ("hit", build)]
            got = {name: timed(cmd, env if name == "hit" else None) for name, cmd in order}
            imports += count(marks, "tensorrt")
            rows.append(got)
            print(
                f"  {engine} remote pair {i + 1}/{pairs}: hit {got['hit']:.3f} s, bare {got['bare']:.2f} s", flush=True
            )
        size = (ws / "build" / f"{engine}.engine").stat().st_size
    finally:
        server.stop()
    ratios = [r["hit"] / r["bare"] for r in rows]
    med = statistics.median(ratios)
    return [
        figure(
            f"{engine}: remote hit over loopback into an empty local store / bare TensorRT-RTX build, wall (median)",
            round(med, 4),
            "×",
            "stated",
            None if imports == 0 else False,
            f"{pairs} interleaved pairs; remote hit median {statistics.median(r['hit'] for r in rows):.3f} s for a "
            f"{size / 1e6:.1f} MB engine, bare median {statistics.median(r['bare'] for r in rows):.2f} s; processes "
            f"that imported TensorRT during the hits: {imports}; seeding build {seed:.1f} s; load average "
            f"{os.getloadavg()[0]:.1f}",
        )
    ]


def main() -> int:
    ap = parser(__doc__)
    ap.add_argument("--pairs", type=int, help="pairs per engine (default 3; --quick 1)")
    ap.add_argument("--parts", default="two,matrix,big,demo,large,remote", help="which measurements (comma-separated)")
    args = ap.parse_args()
    pairs = args.pairs or (1 if args.quick else 3)
    root = Path(tempfile.mkdtemp(prefix="trtls-bench-store-"))
    # every child's bytecode cached, as an installed trtls has it (with PYTHONDONTWRITEBYTECODE, as in this
    # repository's shells, each run would compile the modules changed since the last cached bytecode: ~0.1-0.2 s)
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    os.environ["PYTHONPYCACHEPREFIX"] = str(root / "pycache")
    parts = args.parts.split(",")
    figures = []
    if "two" in parts:
        figures += two_at_once(root)
    if "matrix" in parts:
        figures += matrix_one_changed(root)
    if "big" in parts:
        figures += big_hit(root, 3 if args.quick else 7)
    for engine in ("demo", "large"):
        if engine in parts:
            figures += hit_vs_bare(engine, pairs, root)
    if "remote" in parts:
        for engine in ("demo", "large"):
            figures += remote_hit(engine, pairs, root)
    emit({"title": "Engine store: build avoidance (issue 19)", "figures": figures}, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
