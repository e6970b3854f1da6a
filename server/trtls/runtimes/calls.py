"""What gates 4 and 5 call: `probe`, `run_inputs`, `run_concurrent`, `benchmark`, each one call of a
runtime in child processes (`python -m trtls.runtimes.child` for the Python adapters, the team's
program for `command`), turned into a `RunResult`.

Parent side only: the adapters are never instantiated in this process.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from trtls.fs import Kind, atomic_write_text, parse_json, read_text, remove_tree, scratch_dir
from trtls.runtimes.contract import RunResult, RuntimeSpec, load_npz, save_npz
from trtls.runtimes.process import _Child, _child_env, _classify_exit, _cwd, _wait_all

RESULT_LIMIT = 64 * 1024 * 1024  # the child's result record: latencies of every request, not the outputs


def _write_inputs(inputs: Sequence[Any], workdir: Path) -> list[Path]:
    paths = []
    for i, item in enumerate(inputs):
        if isinstance(item, Mapping):
            paths.append(save_npz(workdir / f"in{i}.npz", item, within=workdir))
        else:
            paths.append(Path(item).resolve())
    return paths


@dataclass(frozen=True)
class _Call:
    """One call of a runtime, as both kinds of runtime (Python adapter child, team's command) receive it."""

    mode: str  # probe | run | concurrent | bench
    in_paths: list[Path]
    workdir: Path
    warmup: int
    iterations: int
    concurrency: int
    timeout: float
    baseline: RuntimeSpec | None = None  # mode paired: the second model, loaded in the same child


def _call(
    spec: RuntimeSpec,
    mode: str,
    inputs: Sequence[Any],
    *,
    warmup: int = 0,
    iterations: int = 0,
    concurrency: int = 1,
    timeout_s: float | None = None,
    baseline: RuntimeSpec | None = None,
) -> RunResult:
    timeout = float(timeout_s if timeout_s is not None else spec.timeout_s)
    problems = spec.problems() + (baseline.problems() if baseline is not None else [])
    if problems:
        return RunResult("error", "; ".join(problems))
    t0 = time.perf_counter()
    workdir = scratch_dir(prefix="trtls-rt-")
    try:
        in_paths = _write_inputs(inputs, workdir)
        call = _Call(mode, in_paths, workdir, warmup, iterations, concurrency, timeout, baseline)
        result = _call_command(spec, call) if spec.kind == "command" else _call_python(spec, call)
        result.wall_s = time.perf_counter() - t0
        return result
    finally:
        with contextlib.suppress(OSError):
            remove_tree(workdir, kind=Kind.scratch, within=workdir.parent)


def _call_python(spec: RuntimeSpec, call: _Call) -> RunResult:
    n_out = len(call.in_paths) if call.mode == "run" else call.concurrency if call.mode == "concurrent" else 0
    out_paths = [call.workdir / f"out{i}.npz" for i in range(n_out)]
    request = {
        "spec": asdict(spec),
        "mode": call.mode,
        "inputs": [str(p) for p in call.in_paths],
        "outputs": [str(p) for p in out_paths],
        "warmup": call.warmup,
        "iterations": call.iterations,
        "concurrency": call.concurrency,
        "result": str(call.workdir / "result.json"),
    }
    if call.baseline is not None:
        request["baseline_spec"] = asdict(call.baseline)
    req_path = call.workdir / "request.json"
    atomic_write_text(req_path, json.dumps(request), kind=Kind.scratch, within=call.workdir)
    child = _Child(
        [sys.executable, "-m", "trtls.runtimes.child", str(req_path)],
        call.workdir,
        _child_env(spec),
        "child",
        _cwd(spec),
    )
    _wait_all([child], call.timeout)
    base = RunResult("error", returncode=child.returncode, peak_rss_bytes=child.rss, stderr_tail=child.stderr_tail())
    bad = _classify_exit(child, call.timeout)
    if bad:
        base.status, base.message = bad
        return base
    try:
        record = parse_json(read_text(call.workdir / "result.json", limit=RESULT_LIMIT, follow=False))
    except (OSError, ValueError):
        base.status = "crash"
        base.message = f"the runtime process exited with code {child.returncode} without a result" + (
            f": {base.stderr_tail[-300:]}" if base.stderr_tail else ""
        )
        return base
    base.status = record.get("status", "error")
    base.message = record.get("message", "")
    for key in ("latencies_s", "load_s", "first_run_s", "timed_wall_s", "gpu_mem_bytes", "paired"):
        if key in record:
            setattr(base, key, record[key])
    if base.status == "ok":
        try:
            base.outputs = [load_npz(p) for p in out_paths]
        except (OSError, ValueError) as exc:
            base.status, base.message = "error", f"unreadable outputs: {exc}"
    return base


def _call_command(spec: RuntimeSpec, call: _Call) -> RunResult:
    assert spec.command
    argv = spec.command
    exe = argv[0]
    if not (shutil.which(exe) or (Path(_cwd(spec)) / exe).exists()):
        return RunResult("unavailable", f"command not found: {exe}")
    if call.mode == "probe":
        return RunResult("ok", "command found")
    env = _child_env(spec)
    deadline = time.monotonic() + call.timeout
    result = RunResult("ok")
    rss: list[int] = []

    def batch(jobs: list[tuple[Path, Path]], tag: str) -> list[_Child] | RunResult:
        children = [
            _Child([*argv, str(i), str(o)], call.workdir, env, f"{tag}{k}", _cwd(spec)) for k, (i, o) in enumerate(jobs)
        ]
        _wait_all(children, max(0.0, deadline - time.monotonic()))
        rss.extend(c.rss for c in children if c.rss is not None)
        for c in children:
            bad = _classify_exit(c, call.timeout)
            if bad:
                return RunResult(bad[0], bad[1], returncode=c.returncode, stderr_tail=c.stderr_tail())
            if c.returncode != 0:
                tail = c.stderr_tail()
                return RunResult(
                    "error",
                    f"the runner exited with code {c.returncode}"
                    + (f": {tail[-500:]}" if tail else " (no message on stderr)"),
                    returncode=c.returncode,
                    stderr_tail=tail,
                )
        return children

    def outputs_of(paths: list[Path]) -> list[dict[str, np.ndarray]] | RunResult:
        try:
            return [load_npz(p) for p in paths]
        except (OSError, ValueError) as exc:
            return RunResult("error", f"the runner exited 0 but its output is missing or unreadable: {exc}")

    if call.mode == "run":
        for w in range(call.warmup):
            got = batch([(call.in_paths[0], call.workdir / f"warm{w}.npz")], f"warm{w}_")
            if isinstance(got, RunResult):
                return _with_rss(got, rss)
            if w == 0:
                result.first_run_s = got[0].elapsed
        outs = [call.workdir / f"out{i}.npz" for i in range(len(call.in_paths))]
        for i, (ip, op) in enumerate(zip(call.in_paths, outs, strict=True)):
            got = batch([(ip, op)], f"run{i}_")
            if isinstance(got, RunResult):
                return _with_rss(got, rss)
            result.latencies_s.append(got[0].elapsed)
            if result.first_run_s is None:
                result.first_run_s = got[0].elapsed
        loaded = outputs_of(outs)
        if isinstance(loaded, RunResult):
            return _with_rss(loaded, rss)
        result.outputs = loaded
    elif call.mode == "concurrent":
        outs = [call.workdir / f"c{i}.npz" for i in range(call.concurrency)]
        got = batch([(call.in_paths[0], o) for o in outs], "conc")
        if isinstance(got, RunResult):
            return _with_rss(got, rss)
        loaded = outputs_of(outs)
        if isinstance(loaded, RunResult):
            return _with_rss(loaded, rss)
        result.outputs = loaded
    elif call.mode == "bench":
        t_loop = None
        for k in range(call.warmup + call.iterations):
            if k == call.warmup:
                t_loop = time.perf_counter()
            got = batch([(call.in_paths[k % len(call.in_paths)], call.workdir / "bench.npz")], f"b{k}_")
            if isinstance(got, RunResult):
                return _with_rss(got, rss)
            if k == 0:
                result.first_run_s = got[0].elapsed
            if k >= call.warmup:
                result.latencies_s.append(got[0].elapsed)
        result.timed_wall_s = (time.perf_counter() - t_loop) if t_loop is not None else None
    return _with_rss(result, rss)


def _with_rss(result: RunResult, rss: list[int]) -> RunResult:
    result.peak_rss_bytes = max(rss) if rss else None
    return result


# ------------------------------------------------------------------------------------------ public API


def probe(spec: RuntimeSpec, *, timeout_s: float | None = None) -> RunResult:
    """Can this runtime load its model here? `ok`, or `unavailable: <reason>` / an error. Loads in a child."""
    return _call(spec, "probe", [], timeout_s=timeout_s)


def run_inputs(
    spec: RuntimeSpec, inputs: Sequence[Any], *, warmup: int = 0, timeout_s: float | None = None
) -> RunResult:
    """Run each input (.npz path or {name: array}) once, serially; `outputs[i]` answers `inputs[i]`.

    `warmup` untimed runs of inputs[0] come first; `latencies_s[i]` is the time of request i.
    """
    if not inputs:
        return RunResult("error", "no inputs")
    return _call(spec, "run", inputs, warmup=warmup, timeout_s=timeout_s)


def run_concurrent(spec: RuntimeSpec, inputs: Any, n: int, *, timeout_s: float | None = None) -> RunResult:
    """`n` simultaneous requests of the same input (threads in one child; `n` processes for `command`)."""
    return _call(spec, "concurrent", [inputs], concurrency=max(1, n), timeout_s=timeout_s)


def benchmark(
    spec: RuntimeSpec, inputs: Sequence[Any], *, warmup: int = 3, iterations: int = 20, timeout_s: float | None = None
) -> RunResult:
    """Latency of `iterations` serial requests (cycling through `inputs`) after `warmup` untimed ones."""
    if not inputs:
        return RunResult("error", "no inputs")
    return _call(spec, "bench", inputs, warmup=warmup, iterations=max(1, iterations), timeout_s=timeout_s)


def benchmark_paired(
    candidate: RuntimeSpec,
    baseline: RuntimeSpec,
    inputs: Sequence[Any],
    *,
    warmup: int = 3,
    pairs: int = 100,
    timeout_s: float | None = None,
) -> RunResult:
    """`pairs` requests on each of two models of one Python adapter kind, loaded in ONE child process and alternated
    request by request (`runtimes.child.paired`): `RunResult.paired` holds each request's wall and CPU time per side
    and the input each pair ran. A `command` runtime runs one program per request and cannot pair in one process."""
    if not inputs:
        return RunResult("error", "no inputs")
    if candidate.kind == "command" or baseline.kind != candidate.kind:
        return RunResult("error", f"{candidate.kind} vs {baseline.kind}: not two models of one in-process runtime")
    return _call(
        candidate, "paired", inputs, warmup=warmup, iterations=max(1, pairs), timeout_s=timeout_s, baseline=baseline
    )
