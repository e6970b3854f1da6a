"""Where `trtls build`'s time before TensorRT is ready goes, process by process, against the bare script: `--no-store`,
or (`--store fresh`) with an engine store emptied before each CLI run, so its key, lookup and publish are in the run,
or (`--store retuned`) that and the engine's own job edited before each run (`_common.edit_recipe`: its output moved):
the memo does not hold, so the job waits for the recipe's check.

Each timed child (the CLI, its worker, the bare TensorRT-RTX script) runs with a `sitecustomize` this probe writes to
a temp folder: it stamps, on CLOCK_MONOTONIC (the clock the worker's events and the bare script's stamps use), the
moment the interpreter reaches it, the first import of each module named in MARKED (the audit hook's `import` event:
the start of that import), and each `subprocess.Popen`. A `sitecustomize` the Python already had still runs after it.
The worker starts without `site` (builds/supervisor/spawn.py `_launch`) and runs `sitecustomize` itself first thing.
The worker's own `environment` and `build_started` events close the timeline, the bare script's stamps its own.
Printed: each mark's median offset from the launch, over the rounds, and the interpreter starts measured beside them
(`python -c pass`, `python -S -c pass`, the worker's modules alone). Not a `run_all` benchmark: it says where the
fixed cost `bench_cli_fixed_cost.py` measures goes.

Usage: python benchmarks/probe_cli_timeline.py [--engine demo] [--rounds 7] [--store off|fresh|retuned] [--trtls DIR]
[--baseline DIR]
(DIR holds a trtls's `server/`, e.g. from `git archive REV server`: `--trtls` the one under test, `--baseline` an
older one timed in the same rounds.)
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import edit_recipe, workspace

HERE = Path(__file__).resolve().parent
MARKED = (
    "trtls.cli.entry",
    "trtls.app.unchanged",
    "trtls.builds.avoidance.reuse",
    "trtls.store.publishing",
    "trtls.builds.supervisor.spawn",
    "trtls.cli.main",
    "asyncio",
    "pydantic",
    "trtls.core.recipe",
    "trtls.onnx_files.profile_checks",
    "trtls.store.key",
    "trtls.app.build",
    "trtls.builds.supervisor.supervisor",
    "trtls.core.events",
    "trtls.builds.cuda",
    "trtls.builds.worker.prefetch",
    "trtls.builds.worker.main",
    "tensorrt_rtx",
)

SITECUSTOMIZE = f"""
import os, sys, time
_log = os.environ.get("TL_LOG")
if _log:
    _f = open(_log, "a", buffering=1)
    _who = "worker" if "worker" in (sys.argv[0] if sys.argv else "") else os.environ.get("TL_WHO", "?")
    def _m(what):
        _f.write(f"{{time.monotonic_ns()}} {{_who}} {{what}}\\n")
    _m("reached sitecustomize")
    _seen = set()
    def _hook(event, args):
        if event == "import" and args[0] in {MARKED!r} and args[0] not in _seen:
            _seen.add(args[0])
            _m("import " + args[0])
        elif event == "subprocess.Popen":
            _m("popen " + " ".join(str(a) for a in (args[1] or [])[1:4]))
        elif event == "open" and isinstance(args[0], str) and "open:" + args[0] not in _seen:
            for part in ("/tensorrt_rtx/__init__", ".onnx"):
                if part in args[0] and part not in _seen:
                    _seen.add(part)
                    _m("opens " + part.strip("/_."))
    sys.addaudithook(_hook)
# the Python's own sitecustomize, if it has one, runs as it would have
_here = os.path.dirname(os.path.abspath(__file__))
_path, _me = sys.path[:], sys.modules["sitecustomize"]
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]
del sys.modules["sitecustomize"]
try:
    import sitecustomize  # noqa: F401
except ImportError:
    sys.modules["sitecustomize"] = _me  # none: the import system finds this one where it left it
finally:
    sys.path[:] = _path
"""


def wall(argv: list[str], env: dict[str, str], n: int = 5) -> float:
    """Median wall ms of `argv` over n runs."""
    xs = []
    for _ in range(n):
        t = time.monotonic_ns()
        subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL)
        xs.append((time.monotonic_ns() - t) / 1e6)
    return statistics.median(xs)


def one_run(cmd: list[str], env: dict[str, str], log: Path, who: str) -> tuple[int, int, list[tuple[int, str]]]:
    """(launch, exit, marks) of one run; marks are (ns, 'who: what')."""
    log.unlink(missing_ok=True)
    launch = time.monotonic_ns()
    proc = subprocess.Popen(cmd, env={**env, "TL_LOG": str(log), "TL_WHO": who}, stdout=subprocess.DEVNULL)
    proc.wait()
    ended = time.monotonic_ns()
    if proc.returncode != 0:
        raise RuntimeError(f"{cmd} exited {proc.returncode}")
    marks = []
    for line in log.read_text().splitlines():
        ns, owner, what = line.split(" ", 2)
        marks.append((int(ns), f"{owner}: {what}"))
    return launch, ended, marks


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--engine", default="demo")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--store", choices=("off", "fresh", "retuned"), default="off")
    ap.add_argument("--trtls", type=Path, help="a folder holding the server/ of the trtls under test")
    ap.add_argument("--baseline", type=Path, help="a folder holding the server/ of an older trtls, timed beside it")
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="trtls-timeline-"))
    try:
        sc = tmp / "sc"
        sc.mkdir()
        (sc / "sitecustomize.py").write_text(SITECUSTOMIZE)
        ws = workspace(tmp)
        old_ws = workspace(tmp, "ws-baseline")  # its own memo: a memo holds only for the code that wrote it
        server = str((a.trtls / "server") if a.trtls else HERE.parent / "server")
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env.update(PYTHONPYCACHEPREFIX=str(tmp / "pycache"), TRTLS_STORE="off")
        env["PYTHONPATH"] = os.pathsep.join([str(sc), server])
        stores = {"cli": tmp / "store", "baseline": tmp / "store-baseline"}  # each emptied before its runs (fresh)
        if a.store != "off":
            env["TRTLS_STORE"] = str(stores["cli"])
        base_env = {**env, "PYTHONPATH": os.pathsep.join([str(sc), str(a.baseline / "server")])} if a.baseline else None
        if base_env is not None and a.store != "off":
            base_env["TRTLS_STORE"] = str(stores["baseline"])
        py = sys.executable
        cli = [py, "-m", "trtls", "build", str(ws), "--engine", a.engine, *(["--no-store"] if a.store == "off" else [])]
        old_cli = [*cli[:4], str(old_ws), *cli[5:]]
        bare = [py, str(HERE / "_bare_build.py"), str(ws / "models" / f"{a.engine}.onnx"), str(tmp / "bare.engine")]
        log = tmp / "tl.log"
        stamps = tmp / "stamps.json"
        plain = {k: v for k, v in env.items() if k != "PYTHONPATH"}
        worker_path = {**plain, "PYTHONPATH": os.pathsep.join([server, *[p for p in sys.path if p]])}
        for argv, e in ((cli, env), (bare, env), *(((old_cli, base_env),) if base_env else ())):  # bytecode, once
            subprocess.run(argv, env={**e, "TRTLS_BENCH_STAMPS": str(stamps)}, check=True, stdout=subprocess.DEVNULL)
        how = {"off": "--no-store", "fresh": "(a fresh store each run)"}.get(
            a.store, "(a fresh store and the engine's output moved before each run: a new job)"
        )
        print(f"== The path to TensorRT ready: `trtls build … --engine {a.engine} {how}` vs the bare script")
        when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
        print(f"   {when}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}")
        starts = {
            "python -c pass": [py, "-c", "pass"],
            "python -S -c pass": [py, "-S", "-c", "pass"],
            "python -S: the worker's modules": [py, "-S", "-c", "import trtls.builds.worker.main"],
            "python -S: tensorrt_rtx": [py, "-S", "-c", "import tensorrt_rtx"],
            "python: trtls.cli.entry": [py, "-c", "import trtls.cli.entry"],
        }
        for name, argv in starts.items():
            print(f"   {name}: {wall(argv, worker_path if '-S' in argv else plain):.0f} ms (median of 5)")
        kinds = [("cli", cli, env), ("bare", bare, env), *((("baseline", old_cli, base_env),) if base_env else ())]
        offsets: dict[str, dict[str, list[float]]] = {k[0]: {} for k in kinds}
        for r in range(a.rounds):
            for who, cmd, e in kinds[r % len(kinds) :] + kinds[: r % len(kinds)]:
                run_env = {**e, "TRTLS_BENCH_STAMPS": str(stamps)}
                if who in stores and a.store != "off":
                    shutil.rmtree(stores[who], ignore_errors=True)
                if who in stores and a.store == "retuned":
                    edit_recipe((ws if who == "cli" else old_ws) / "trtls.toml", a.engine)
                launch, ended, marks = one_run(cmd, run_env, log, who)
                if who != "bare":
                    folder = (ws if who == "cli" else old_ws) / ".trtls" / "runs"
                    runs = sorted(folder.glob("*/events.jsonl"), key=lambda p: p.stat().st_mtime_ns)
                    seen: set[str] = set()
                    for line in runs[-1].read_text().splitlines():
                        ev = json.loads(line)
                        if ev.get("type") not in seen and "t_ns" in ev:  # each kind's first: before and after the build
                            seen.add(ev["type"])
                            marks.append((ev["t_ns"], f"worker event: {ev['type']}"))
                else:
                    got = json.loads(stamps.read_text())
                    marks += [(got["ready"], "bare: tensorrt_rtx imported"), (got["call"], "bare: the builder's call")]
                    marks.append((got["return"], "bare: the builder returned"))
                marks.append((ended, f"{who}: exit seen"))
                for ns, what in marks:
                    offsets[who].setdefault(what, []).append((ns - launch) / 1e6)
        for who in offsets:
            print(f"-- {who}: ms from the launch, median of {a.rounds} (min–max)")
            rows = sorted(offsets[who].items(), key=lambda kv: statistics.median(kv[1]))
            for what, xs in rows:
                print(f"   {statistics.median(xs):8.1f}  ({min(xs):.0f}–{max(xs):.0f})  {what}  [{len(xs)}]")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
