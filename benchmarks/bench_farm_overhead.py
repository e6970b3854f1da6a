"""The farm's own cost, as CPU (which contention does not hide) and as fixed and stop times, all from one run:

1. bare: N `large` builds started by hand side by side (benchmarks/_bare_build.py): their CPU-seconds and wall;
2. cold: `trtls build --matrix` of N cells on an embedded instance (address = "local", no warm farm): the
   CPU-seconds of every process the command starts, by kind — driver (the CLI), Ray's node processes (GCS,
   raylet, dashboard head, agents, monitors), the node workers (Ray actors), the builds (`trtls.builds.worker`)
   — sampled from /proc every 0.2 s (trtls.builds.farm.proc_tree); farm overhead = everything but the builds,
   per cell and as a fraction of the builds' CPU; fixed cost = command start → first cell's `build_started`, and
   where it went: the matrix summary's `cluster.fixedCost` (seconds since the CLI process started: connected,
   placed, actorReady, workerPreloaded — TensorRT imported on the node —, onnxOnNode, buildStarted,
   firstPhaseStart), printed as a table of stages and the time each one added; and the tail after the builds:
   each cell's `cluster.cells[*].tail` (builderReturned → finishedOnNode → engineLocal → done), the summary and the
   command's exit, as a table of when the last cell reached each stage;
3. warm: the same after `trtls farm up` (the head's processes counted by their CPU delta over the run) — a first
   and a second run on the same farm (`--warm-runs`): the farm's actors and their preloaded workers are kept;
   With `--bare-beside`, N bare builds run just before each farm run (the first of them is the bare figure) and once
   after the last, and each run's throughput is read against the mean of the bare runs on either side of it (and
   against the one before it alone; the spread of all the bare runs is printed): a `large` build's own spread (±5-8 %
   from one run to the next on the 16-core host) is larger than the gaps the figure is meant to show, and a host whose
   speed drifts through the benchmark (2026-12-07 21:48, a fresh H100 host: the same 16 bare builds 38.3 → 42.5 →
   46.0 s, 578 → 635 → 690 CPU-s, two minutes apart) makes a run read against the bare run before it alone look
   slower than it is — a steady drift cancels in the mean of the runs on either side;
   `--parts cold-ab --baseline DIR`: cold runs of this code and of an older trtls (DIR holds its `server/`, e.g. from
   `git archive REV server`) alternated for `--rounds` rounds: the fixed cost and each stage's median, side by side;
4. stop: SIGINT to a running matrix (N running + N waiting cells), cold and warm: signal → exit, every cell
   `cancelled`, nothing the command started left running; at the first cell's `phase_start`, or (`--stop-when all`)
   1 s after all N running cells are inside TensorRT's build.

Every process reads trtls's and Ray's bytecode, as installed (`_common.bytecode_as_installed`).

`--parts cli`: N `trtls build --no-store` of the same engine started by hand side by side (no farm): whether a
cell's extra CPU is the farm's or the worker's own.

`--parts mixed`: on the warm farm, N/2 cells and N/2 bare builds started in the same moment: a farm build's CPU against
a bare build's in the same minute, free of the host's drift between runs.

Usage: python benchmarks/bench_farm_overhead.py [--cells 2] [--model large|demo] [--parts bare cli cold warm mixed stop]
       [--bare-beside] [--stop-when first|all] [--baseline DIR --rounds N] [--json out.json]
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "server"))
from _common import SAMPLE, bytecode_as_installed, emit, ensure_models, figure, parser, quickstart_profiles
from trtls.builds.farm import proc_tree

HERE = Path(__file__).resolve().parent
TRTLS = [sys.executable, "-m", "trtls.cli.main"]


def recipe(ws: Path, model: str, cells: int, slots: int) -> Path:
    ws.mkdir(parents=True, exist_ok=True)
    text = (
        f'[cluster]\naddress = "local"\nnum_cpus = {slots}\nkeep_warm_s = 0\nlabels = {{ "trtls/pool" = "bench" }}\n\n'
    )
    text += f'[engines.m]\nonnx = "{SAMPLE / "models" / model}.onnx"\noutput = "build/m.engine"\n'
    text += quickstart_profiles(model) + "\n"
    text += '\n[engines.m.run_on]\nlabels = { "trtls/pool" = "bench" }\nnum_cpus = 1\n'
    text += '\n[engines.m.matrix]\noutput = "build/m-{avg_timing_iterations}.engine"\n'
    text += f"avg_timing_iterations = [{', '.join(str(i + 1) for i in range(cells))}]\n"
    (ws / "trtls.toml").write_text(text)
    return ws / "trtls.toml"


def kind(p: proc_tree.Proc, driver: int) -> str:
    if p.pid == driver:
        return "driver"
    if "trtls.builds.worker" in p.name or "trtls.builds.farm.preloaded_worker" in p.name:
        return "builds"
    if p.name.startswith("ray::") and "Agent" not in p.name:
        return "node workers (actors)"
    return "Ray node (GCS, raylet, agents)"


ROLES = (  # (needle in the command line, role): the finer breakdown of the farm's own processes
    ("gcs_server", "GCS"),
    ("raylet/raylet", "raylet"),
    ("ray::DashboardAgent", "dashboard agent"),
    ("ray::RuntimeEnvAgent", "runtime-env agent"),
    ("dashboard/dashboard.py", "dashboard head (API server)"),
    ("_private/log_monitor.py", "log monitor"),
    ("autoscaler/_private/monitor.py", "autoscaler monitor"),
    ("ray::IDLE", "idle Ray workers (not actors)"),
    ("ray::NodeWorker", "node-worker actors"),
    ("ray::NodeHost", "node-host actors (one per node)"),
)


def role(p: proc_tree.Proc, driver: int) -> str:
    """Which farm process `p` is (finer than `kind`): the driver, the builds, or one of ROLES."""
    k = kind(p, driver)
    if k in ("driver", "builds"):
        return k
    return next((r for needle, r in ROLES if needle in p.name), f"other: {p.name[:40]}")


class Sampler:
    """The last CPU-seconds seen of every process under `roots` (by pid and start time), every `every_s`."""

    def __init__(self, roots: list[int], every_s: float = 0.2):
        self.roots, self.every_s = roots, every_s
        self.seen: dict[tuple[int, int], proc_tree.Proc] = {}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.stop.is_set():
            self.sample()
            self.stop.wait(self.every_s)

    def sample(self) -> None:
        procs = proc_tree.all_procs()
        for root in self.roots:
            found = {root: procs[root]} if root in procs else {}
            found.update(proc_tree.descendants(root, procs))
            for p in found.values():
                old = self.seen.get((p.pid, p.start))
                if old is not None and not p.name:  # exiting: its command line is gone, its role is not
                    p = proc_tree.Proc(p.pid, p.ppid, p.start, p.cpu_s, old.name)
                self.seen[(p.pid, p.start)] = p

    def __enter__(self) -> Sampler:
        self.sample()
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()


def side_by_side(procs: list[subprocess.Popen], t0: float) -> dict:
    """The wall since `t0` until every one of `procs` has exited 0, and the CPU of each whole process tree (wait4)."""
    cpu = 0.0
    for p in procs:
        _, status, ru = os.wait4(p.pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        cpu += ru.ru_utime + ru.ru_stime
    return {"wallS": round(time.monotonic() - t0, 2), "cpuS": round(cpu, 2)}


def start_bare(model: str, n: int, out: Path, name: str = "bare") -> list[subprocess.Popen]:
    """N bare builds (benchmarks/_bare_build.py) of `model` started now, their engines `out/<name>-<i>.engine`."""
    return [
        subprocess.Popen([sys.executable, str(HERE / "_bare_build.py"), str(SAMPLE / "models" / f"{model}.onnx"),
                          str(out / f"{name}-{i}.engine")])
        for i in range(n)
    ]  # fmt: skip


def bare(model: str, n: int, out: Path) -> dict:
    t0 = time.monotonic()
    return side_by_side(start_bare(model, n, out), t0)


def by_hand_cli(model: str, n: int, out: Path, env: dict[str, str]) -> dict:
    """N `trtls build --no-store` of the same engine started by hand side by side, each in its own copy of the
    quickstart: the worker's own cost at N slots with no farm at all (is a farm cell's extra CPU the farm's, or the
    worker's?). Measured as `bare` is: the CPU of each whole process tree (wait4), the wall of all N."""
    folders = []
    for i in range(n):
        ws = out / f"hand-{i}"
        if not ws.exists():
            shutil.copytree(SAMPLE, ws, ignore=shutil.ignore_patterns(".trtls", "build", "*.engine"))
        folders.append(ws)
    t0 = time.monotonic()
    procs = [
        subprocess.Popen(TRTLS + ["build", str(ws), "--engine", model, "--no-store"], env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for ws in folders
    ]  # fmt: skip
    return side_by_side(procs, t0)


def mixed(model: str, n: int, out: Path, env: dict[str, str], head_pid: int) -> dict:
    """N/2 cells on the warm farm and N/2 bare builds started in the same moment, on the same cores: each farm build's
    CPU against each bare build's, in the same minute. A host's build speed drifts by more than the farm's cost from
    one run to the next (699.7–927.4 CPU-s for the same 16 bare builds within 20 minutes, 2026-12-06): runs one after
    the other cannot tell a farm cost of a few percent from that drift; builds side by side share it. A bare build's
    CPU includes its interpreter's start and TensorRT's import (~0.5 CPU-s on the 16-core host), which a warm farm's
    preloaded worker paid before the run: ~1 % of a `large` build."""
    half = n // 2
    path = recipe(out / "mixed", model, half, n)
    t0 = time.monotonic()
    procs = start_bare(model, half, out, "mixed-bare")
    farm = matrix_run(path, env, head_pid)
    beside = side_by_side(procs, t0)
    farm_cpu = farm["cpuByKindS"].get("builds", 0.0)
    return {
        "cells": half,
        "bare": beside,
        "farm": farm,
        "cpuPerBuildS": {"bare": round(beside["cpuS"] / half, 2), "farm": round(farm_cpu / half, 2)},
        "cpuRatio": round(farm_cpu / beside["cpuS"], 3) if beside["cpuS"] else None,
    }


def cold_ab(path: Path, env: dict[str, str], baseline: Path, rounds: int) -> dict:
    """Cold runs of this code and of the trtls in `baseline`, alternated (who goes first swaps every round)."""
    bytecode_as_installed()  # this code's modules compiled; the baseline's next
    subprocess.run([sys.executable, "-m", "compileall", "-q", "-j", "0", str(baseline / "server" / "trtls")],
                   check=False, capture_output=True)  # fmt: skip
    old = {**env, "PYTHONPATH": os.pathsep.join(filter(None, [str(baseline / "server"), env.get("PYTHONPATH")]))}
    runs: dict[str, list[dict]] = {"now": [], "baseline": []}
    for i in range(rounds):
        order = [("now", env), ("baseline", old)] if i % 2 == 0 else [("baseline", old), ("now", env)]
        for label, e in order:
            r = matrix_run(path, e, None)
            assert r["exit"] == 0 and r["outcome"] == "built", (label, r["exit"], r["outcome"])
            runs[label].append({"fixedCostS": r["fixedCostS"], "stages": r["stages"], "wallS": r["wallS"]})
            print(f"cold-ab round {i + 1}/{rounds} {label}: fixed cost {r['fixedCostS']} s", flush=True)
    return runs


def cold_ab_figures(ab: dict) -> list[dict]:
    now, base = ab["now"], ab["baseline"]
    sooner = sum(a["fixedCostS"] < b["fixedCostS"] for a, b in zip(now, base, strict=True))
    med = statistics.median
    lines = []
    for stage in STAGE_TEXT:
        a = [r["stages"][stage] for r in now if stage in r["stages"]]
        b = [r["stages"][stage] for r in base if stage in r["stages"]]
        lines.append(f"{stage:>16}  {round(med(a), 3) if a else '—':>6}  {round(med(b), 3) if b else '—':>6}")
    return [
        figure(f"cold fixed cost, this code vs the baseline ({len(now)} alternated rounds, median)",
               med(r["fixedCostS"] for r in now), "s", "stated", None,
               f"baseline {med(r['fixedCostS'] for r in base)} s; this code sooner in {sooner} of {len(now)}; "
               "stage (s since the CLI started, median): this code, baseline\n" + "\n".join(lines)),
    ]  # fmt: skip


def matrix_run(path: Path, env: dict[str, str], head_pid: int | None) -> dict:
    """One `trtls build --matrix --json`: CPU by kind, fixed cost, events through Ray."""
    baseline: dict[tuple[int, int], float] = {}
    if head_pid is not None:  # the warm head's processes: count what they spent during this run only
        snap = Sampler([head_pid])
        snap.sample()
        baseline = {k: p.cpu_s for k, p in snap.seen.items()}
    t0 = time.monotonic()
    cli = subprocess.Popen(TRTLS + ["build", str(path), "--matrix", "--json"], env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL)  # fmt: skip
    first_started = None
    events = 0
    timeline: list[tuple[float, str]] = []  # when each cell's builder started and returned (the run's shape)
    strays: list[str] = []
    summary: dict = {}
    with Sampler([cli.pid] + ([head_pid] if head_pid else [])) as sampler:
        assert cli.stdout is not None
        for raw in cli.stdout:
            try:
                rec = json.loads(raw)
            except ValueError:  # --json promises JSON lines: keep what else came, to say what printed it
                strays.append(raw.decode(errors="replace")[:300] if isinstance(raw, bytes) else str(raw)[:300])
                continue
            events += 1
            if rec.get("type") == "build_started" and first_started is None:
                first_started = time.monotonic() - t0
            if rec.get("type") in ("build_started", "builder_returned", "build_finished"):
                timeline.append((round(time.monotonic() - t0, 2), rec["type"]))
            if rec.get("type") == "summary":
                summary = rec["summary"]
        _, status, ru = os.wait4(cli.pid, 0)
    by_kind: dict[str, float] = {}
    by_role: dict[str, list] = {}
    for key, p in sampler.seen.items():
        spent = p.cpu_s - baseline.get(key, 0.0)
        k = kind(p, cli.pid)
        by_kind[k] = by_kind.get(k, 0.0) + spent
        got = by_role.setdefault(role(p, cli.pid), [0.0, 0])
        got[0] += spent
        got[1] += 1
    wall = time.monotonic() - t0
    return {
        "wallS": round(wall, 2),
        # every role's CPU-seconds, how many processes, and CPU-milliseconds per second of the run: the farm's own
        # processes cost per second they live (Ray's timers), not per event — so on an oversubscribed host, where
        # the run's wall is longer than the builds would need, they weigh more against the builds' CPU
        "cpuByRoleS": {
            r: {"cpuS": round(c, 2), "procs": n, "msPerS": round(1000 * c / wall, 1)}
            for r, (c, n) in sorted(by_role.items(), key=lambda kv: -kv[1][0])
        },  # fmt: skip
        "exit": os.waitstatus_to_exitcode(status),
        "outcome": summary.get("outcome"),
        "warm": (summary.get("cluster") or {}).get("warm"),
        "fixedCostS": round(first_started, 2) if first_started else None,
        "cpuByKindS": {k: round(v, 2) for k, v in sorted(by_kind.items())},
        "driverRusageS": round(ru.ru_utime + ru.ru_stime + 0.0, 2),  # the CLI and what it reaped
        "eventLines": events,
        "nonJsonLines": strays,
        "stages": (summary.get("cluster") or {}).get("fixedCost") or {},
        # how many builders ran at once, and when: a farm that leaves a core idle shows it here (issue 31)
        "concurrency": concurrency(timeline),
        "cellActors": [
            {k: c.get(k) for k in ("actor", "warm", "workerPreloadedBeforeJob", "workerImportS")}
            for c in ((summary.get("cluster") or {}).get("cells") or {}).values()
        ],
        "tail": tail(summary.get("cluster") or {}, wall),
    }


TAIL_TEXT = {
    "builderReturned": "the builder returned (builder_returned reached the driver)",
    "finishedOnNode": "the node's worker finished (engine written, fsynced, hashed)",
    "engineLocal": "the engine at the output here (sent back, or written in place)",
    "done": "the cell done (evidence, engine re-read; with a store: published)",
    "summary": "the run's summary written",
    "exit": "the command exited (Ray disconnected, the instance ended)",
}


def tail(cluster: dict, wall: float) -> dict:
    """After the builds: each stage of every cell's tail (cluster.cells[*].tail, s since the CLI process started) —
    the last cell's time of it, and the median and largest time a cell spent from the stage before to it — then the
    summary and the exit."""
    cells = [c.get("tail") or {} for c in (cluster.get("cells") or {}).values()]
    out: dict = {"last": {}, "stepMedianS": {}, "stepMaxS": {}}
    prev = None
    for stage in ("builderReturned", "finishedOnNode", "engineLocal", "done"):
        seen = [c[stage] for c in cells if stage in c]
        if seen:
            out["last"][stage] = max(seen)
        if prev is not None:
            steps = sorted(c[stage] - c[prev] for c in cells if stage in c and prev in c)
            if steps:
                out["stepMedianS"][stage] = round(steps[len(steps) // 2], 3)
                out["stepMaxS"][stage] = round(steps[-1], 3)
        prev = stage
    if cluster.get("summaryS") is not None:
        out["last"]["summary"] = cluster["summaryS"]
    out["last"]["exit"] = round(wall, 3)  # from the bench's start of the command (≈ the process start)
    return out


def tail_lines(label: str, r: dict) -> list[str]:
    """The tail as a table: when the last cell reached each stage, what it added, a cell's median/largest step."""
    t = r.get("tail") or {}
    last = t.get("last") or {}
    lines = [f"  tail, {label} (s since the CLI process started; the last cell's; +added; a cell's step median/max):"]
    prev = None
    for key, text in TAIL_TEXT.items():
        if key not in last:
            continue
        added = f"+{last[key] - prev:6.2f}" if prev is not None else " " * 7
        step = ""
        if key in (t.get("stepMedianS") or {}):
            step = f"  (cell {t['stepMedianS'][key]:.2f}/{t['stepMaxS'][key]:.2f})"
        lines.append(f"    {last[key]:8.2f}  {added}  {key:16} {text}{step}")
        prev = last[key]
    return lines


def concurrency(timeline: list[tuple[float, str]]) -> dict:
    """Builders running at once over the run (build_started +1, builder_returned or build_finished of a cell that
    had not returned −1): the peak, the seconds spent at each level, the starts and ends."""
    level, peak, at, last, seconds = 0, 0, 0.0, None, {}
    returned = 0
    for t, kind_ in sorted(timeline):
        if last is not None:
            seconds[level] = round(seconds.get(level, 0.0) + t - last, 2)
        last = t
        if kind_ == "build_started":
            level += 1
        elif kind_ == "builder_returned":
            level, returned = level - 1, returned + 1
        elif kind_ == "build_finished" and returned == 0:
            level -= 1
        peak = max(peak, level)
        at = t
    return {"peak": peak, "secondsAtLevel": seconds, "lastEventS": at,
            "starts": [t for t, k in timeline if k == "build_started"],
            "returns": [t for t, k in timeline if k == "builder_returned"]}  # fmt: skip


STAGE_TEXT = {
    "runStart": "CLI start-up (Python, recipe, plan)",
    "connected": "connect to Ray (import ray, ray.init)",
    "placed": "look at the nodes, place every cell",
    "reserved": "the first cell's bundle reserved (its placement group ready)",
    "actorReady": "node worker ready (new actor, or a warm one claimed)",
    "onnxOnNode": "ONNX on the node",
    "buildStarted": "worker starts the build (job read, TensorRT imported)",
    "firstPhaseStart": "first phase_start",
}


def breakdown(label: str, r: dict) -> list[str]:
    """The fixed cost's stages in order, with the time each added; where TensorRT was imported on the node."""
    st = r.get("stages") or {}
    lines = [f"  fixed cost breakdown, {label} (s since the CLI process started; stage: +added):"]
    prev = 0.0
    for key, text in STAGE_TEXT.items():
        if key in st:
            lines.append(f"    {st[key]:8.2f}  +{st[key] - prev:6.2f}  {key:16} {text}")
            prev = st[key]
    pre = st.get("workerPreloaded")
    if pre is not None:
        where = "before this command started (a warm worker)" if pre < 0 else "during this command"
        lines.append(f"    {pre:8.2f}           workerPreloaded  TensorRT imported on the node: {where}")
    lines.append(f"    cells' node workers: {r.get('cellActors')}")
    return lines


def stop_run(path: Path, env: dict[str, str], building: int = 1) -> dict:
    """SIGINT once `building` cells' builders are mid-build (1: the first; more: 1 s after the last of them started,
    so every one is inside TensorRT's build): signal → parent summary, signal → exit; states of every cell."""
    cli = subprocess.Popen(TRTLS + ["build", str(path), "--matrix", "--json"], env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL)  # fmt: skip
    assert cli.stdout is not None
    started: set[str] = set()
    for raw in cli.stdout:
        rec = json.loads(raw)
        if rec.get("type") == "phase_start":
            started.add(str(rec.get("buildId")))
            if len(started) >= building:
                break
    if building > 1:
        time.sleep(1.0)
    started = proc_tree.descendants(cli.pid)
    t_sig = time.monotonic()
    t_sig_ns = time.monotonic_ns()
    cli.send_signal(signal.SIGINT)
    cells, t_summary = [], None
    seen: list[float] = []  # each cell's worker acknowledged the cancel (its own stamp: one clock on one machine)
    first_callback: dict[str, float] = {}  # per running cell: its builder's first callback after the signal
    ends: list[float] = []  # each cell's summary reached the command's output
    for raw in cli.stdout:
        rec = json.loads(raw)
        if rec.get("type") == "cancel_acknowledged" and rec.get("t_ns"):
            seen.append((rec["t_ns"] - t_sig_ns) / 1e9)
        elif rec.get("type") in ("step", "phase_start") and rec.get("t_ns", 0) > t_sig_ns:
            # the builder's first callback after the signal, stamped by the worker (one clock on one machine): a
            # cancel delivered in time is seen right there, so a late ack is the builder's silence, not the farm's
            first_callback.setdefault(str(rec.get("buildId")), (rec["t_ns"] - t_sig_ns) / 1e9)
        if rec.get("type") == "cell_summary":
            cells.append(rec["summary"]["outcome"])
            ends.append(time.monotonic() - t_sig)
        if rec.get("type") == "summary":
            t_summary = time.monotonic() - t_sig
    code = cli.wait()
    t_exit = time.monotonic() - t_sig
    left = [p.name[:40] for p in proc_tree.alive(started)]
    return {"exit": code, "summaryS": round(t_summary or -1, 2), "exitS": round(t_exit, 2), "cells": cells,
            "left": left, "cancelSeenS": sorted(round(x, 2) for x in seen),
            "firstCallbackAfterSignalS": sorted(round(x, 2) for x in first_callback.values()),
            "cellEndedS": sorted(round(x, 2) for x in ends)}  # fmt: skip


def main() -> int:
    ap = parser(__doc__)
    ap.add_argument("--cells", type=int, default=2)
    ap.add_argument("--model", default="large")
    ap.add_argument("--parts", nargs="+", default=["bare", "cold", "warm", "stop"])
    ap.add_argument("--warm-runs", type=int, default=2, help="matrix runs on the same warm farm")
    ap.add_argument(
        "--stop-when", choices=["first", "all"], default="first",
        help="stop part: SIGINT at the first cell's phase_start, or 1 s after all N running cells are building",
    )  # fmt: skip
    ap.add_argument("--baseline", type=Path, help="an older trtls's server/ folder, for the cold-ab part")
    ap.add_argument("--rounds", type=int, default=5, help="cold-ab: rounds of one run each")
    ap.add_argument("--bare-beside", action="store_true",
                    help="N bare builds again just before each farm run and after the last")  # fmt: skip
    args = ap.parse_args()
    ensure_models()
    bytecode_as_installed("ray")
    tmp = Path(tempfile.mkdtemp(prefix="trtls-bench-farm-"))
    # no warm farm but the one this run starts; no engine store (a cell built once would be a hit the next time)
    env = {**os.environ, "TRTLS_FARM_STATE": str(tmp / "farm.json"), "TRTLS_STORE": "off"}
    n = args.cells
    path = recipe(tmp / "ws", args.model, n, n)
    stop_path = recipe(tmp / "stop", args.model, 2 * n, n)
    res: dict = {"cells": n, "model": args.model, "cpus": os.cpu_count()}
    figures = []
    if "bare" in args.parts and not args.bare_beside:  # with --bare-beside the first of those runs is this one
        res["bare"] = bare(args.model, n, tmp)
        print(f"bare: {n} builds side by side {res['bare']}", flush=True)
    beside: dict[str, dict] = res.setdefault("bareBeside", {})

    def bare_before(label: str) -> None:
        if args.bare_beside and "bare" in args.parts:
            beside[label] = bare(args.model, n, tmp)
            res.setdefault("bare", beside[label])
            print(f"bare {'after the last farm run' if label == 'after' else 'before ' + label}: {beside[label]}",
                  flush=True)  # fmt: skip

    if "cli" in args.parts:
        bare_before("cli")
        res["cli"] = by_hand_cli(args.model, n, tmp, env)
        print(f"cli: {n} `trtls build --no-store` side by side {res['cli']}", flush=True)
    if "cold" in args.parts:
        bare_before("cold")
        res["cold"] = matrix_run(path, env, None)
        print(f"cold: {res['cold']}", flush=True)
    if "cold-ab" in args.parts:
        assert args.baseline is not None, "cold-ab needs --baseline DIR"
        res["coldAB"] = cold_ab(path, env, args.baseline, args.rounds)
        figures += cold_ab_figures(res["coldAB"])
    if "stop" in args.parts:
        res["stopCold"] = stop_run(stop_path, env, n if args.stop_when == "all" else 1)
        print(f"stop (embedded): {res['stopCold']}", flush=True)
    head = None
    if "warm" in args.parts or "mixed" in args.parts:
        t0 = time.monotonic()
        up = subprocess.run(TRTLS + ["farm", "up", "--num-cpus", str(n), "--label", "trtls/pool=bench"], env=env,
                            capture_output=True, text=True)  # fmt: skip
        res["farmUpS"] = round(time.monotonic() - t0, 2)
        assert up.returncode == 0, up.stderr
        head = json.loads(subprocess.run(TRTLS + ["farm", "status", "--json"], env=env, capture_output=True,
                                         text=True).stdout)["pid"]  # fmt: skip
        try:
            for i in range(args.warm_runs if "warm" in args.parts else 0):
                key = "warm" if i == 0 else f"warm{i + 1}"
                bare_before(key)
                res[key] = matrix_run(path, env, head)
                print(f"{key}: {res[key]}", flush=True)
            if "mixed" in args.parts:
                res["mixed"] = mixed(args.model, n, tmp, env, head)
                print(f"mixed: {res['mixed']['cpuPerBuildS']} CPU-s a build, farm/bare {res['mixed']['cpuRatio']}")
            if "stop" in args.parts:
                res["stopWarm"] = stop_run(stop_path, env, n if args.stop_when == "all" else 1)
                print(f"stop (warm farm): {res['stopWarm']}", flush=True)
        finally:
            subprocess.run(TRTLS + ["farm", "down"], env=env, capture_output=True)
    if beside:
        bare_before("after")  # the last farm run's other side
    for label in ["cold", "warm"] + [f"warm{i + 1}" for i in range(1, args.warm_runs)]:
        r = res.get(label)
        if not r:
            continue
        cpu = r["cpuByKindS"]
        builds = cpu.get("builds", 0.0)
        over = sum(v for k, v in cpu.items() if k != "builds")
        r["overheadCpuS"], r["overheadPerCellS"] = round(over, 2), round(over / n, 2)
        r["overheadFraction"] = round(over / builds, 3) if builds else None
        roles = "\n".join(f"    {v['cpuS']:8.2f} CPU-s {v['msPerS']:7.1f} ms/s  {v['procs']:3d} × {k}"
                           for k, v in r["cpuByRoleS"].items())  # fmt: skip
        figures.append(figure(f"farm overhead CPU, {label} ({n} cells)", r["overheadFraction"], "× builds' CPU",
                              "≤ 0.05", (r["overheadFraction"] or 1) <= 0.05,
                              f"{over:.1f} CPU-s beyond {builds:.1f} CPU-s of builds in {r['wallS']} s; {cpu}\n"
                              f"  by process (CPU-s, CPU-ms per second of the run, processes):\n{roles}"))  # fmt: skip
        warm = label.startswith("warm")
        if r.get("tail", {}).get("last", {}).get("builderReturned") is not None:
            last = r["tail"]["last"]
            figures.append(figure(f"tail, {label}: last builder returned → exit", round(last["exit"] -
                                  last["builderReturned"], 2), "s", "stated", None,
                                  "\n".join(tail_lines(label, r))))  # fmt: skip
        figures.append(figure(f"fixed cost, {label}: start → first build_started", r["fixedCostS"], "s",
                              "≤ 3 s warm" if warm else "stated", (r["fixedCostS"] or 99) <= 3 if warm else None,
                              "\n".join(breakdown(label, r))))  # fmt: skip
        if label in beside:
            walls = [b["wallS"] for b in beside.values()]
            labels = list(beside)  # in the order they ran: before each farm run, then "after"
            after = beside[labels[labels.index(label) + 1]] if labels.index(label) + 1 < len(labels) else None
            sides = [beside[label]["wallS"]] + ([after["wallS"]] if after else [])
            figures.append(
                figure(
                    f"{label}: {n} cells vs the {n} bare builds on either side of it, wall",
                    round(sum(sides) / len(sides) / r["wallS"], 3),
                    "× throughput",
                    "≥ 0.9 (on a 16-core host)",
                    None,
                    f"bare before {beside[label]['wallS']} s ({beside[label]['cpuS']} CPU-s), after "
                    f"{after['wallS'] if after else '—'} s ({after['cpuS'] if after else '—'} CPU-s); this run "
                    f"{r['wallS']} s (its builds {r['cpuByKindS'].get('builds')} CPU-s); against the one before it "
                    f"alone: {round(beside[label]['wallS'] / r['wallS'], 3)} ×; every bare run of this benchmark: "
                    f"{min(walls)}–{max(walls)} s ({walls}); against their mean: "
                    f"{round(sum(walls) / len(walls) / r['wallS'], 3)} ×",
                )
            )
        elif "bare" in res:
            figures.append(figure(f"{label}: {n} cells vs {n} bare builds, wall", round(res["bare"]["wallS"] /
                                  r["wallS"], 3), "× throughput", "≥ 0.9 (on a 16-core host)", None))  # fmt: skip
    if res.get("mixed"):
        m = res["mixed"]
        figures.append(
            figure(
                f"mixed: a farm build's CPU / a bare build's, {m['cells']} of each side by side on the warm farm",
                m["cpuRatio"],
                "×",
                "stated (a farm cost in the builds themselves shows here, free of the host's drift)",
                None,
                f"CPU-s a build: farm {m['cpuPerBuildS']['farm']}, bare {m['cpuPerBuildS']['bare']}; the farm's run "
                f"{m['farm']['wallS']} s, the bare builds' {m['bare']['wallS']} s; the farm's own CPU "
                f"{m['farm']['cpuByKindS']}",
            )
        )
    for label in ("stopCold", "stopWarm"):
        r = res.get(label)
        if r:
            ok = set(r["cells"]) == {"cancelled"} and not r["left"] and r["exit"] == 130
            figures.append(figure(f"stop → exit ({label})", r["exitS"], "s", "≤ 2 s, every cell cancelled",
                                  ok and r["exitS"] <= 2, f"summary after {r['summaryS']} s; cells {r['cells']}; "
                                  f"left running: {r['left'] or 'nothing'}; where the seconds went (s after the "
                                  f"signal): each cell's cancel acknowledged (by its worker; by the driver for a "
                                  f"cell still queued) at {r['cancelSeenS']}, each running builder's first "
                                  f"callback after the signal at {r['firstCallbackAfterSignalS']}, "
                                  f"each cell ended at {r['cellEndedS']}"))  # fmt: skip
    res["figures"] = figures
    res["title"] = f"build farm overhead: {n} `{args.model}` cells on this {os.cpu_count()}-core machine"
    emit(res, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
