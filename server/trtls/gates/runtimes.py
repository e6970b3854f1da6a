"""Runtimes for gates 4 and 5: run a model on `.npz` inputs, get `.npz` outputs, always in a child process.

The contract every runtime honours (`RuntimeSpec.kind`):

* inputs: one `.npz` per request (array name = model input name); outputs: one `.npz` (name = output name);
* every call runs in a CHILD PROCESS, in its own process group, with a timeout (`timeout_s`, whole call):
  a runtime that hangs or crashes is cut (SIGKILL to the group) and the caller gets a `RunResult` with
  `status` "timeout" / "crash" — never a hang, never an exception from malformed input;
* a runtime refuses malformed inputs with a clean error: missing/unknown input, wrong dtype, wrong rank or
  static dimension, empty (zero-size), NaN/Inf in a float input, or more than `max_input_bytes` in total.
  The Python adapters do this before running (`validate_feed`); a `command` runner must do it itself
  (it gets the cap in the environment variable `TRTLS_MAX_INPUT_BYTES`) and exit non-zero with a message.

Adapters:

* `onnxruntime`     — ONNX Runtime, CPUExecutionProvider (`threads` = intra-op threads, default 1);
* `onnx_reference`  — `onnx.reference.ReferenceEvaluator` (slow, exact: the reference of references);
* `tensorrt`        — a serialized engine through TensorRT 10 (`tensorrt`, else `tensorrt_rtx`) with device
  buffers from cuda-python (`cuda.bindings.runtime`, else `cuda.cudart`), imported lazily in the child.
  Without a GPU TensorRT accepts it reports `status="unavailable"` with the reason (gate 4 → hold);
* `command`         — an external program run as `CMD... in.npz out.npz` (a team's native C++ runner).
  Exit 0 and a readable out.npz = success; any other exit = a clean error (stderr tail is the message);
  killed by a signal = crash. Timings for `command` include process start and model load (documented).

FAULT INJECTION: `perturb > 0` adds seeded Gaussian noise (std = perturb) to every float output of the
Python adapters. It exists to prove gate 4 catches a drifting runtime (tests, the sample's failing
variant); gate 4 never passes a route that has it enabled.

Entry point of the child: `python -m trtls.gates.runtimes REQUEST.json` (internal).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

KINDS = ("onnxruntime", "onnx_reference", "tensorrt", "command")
RunStatus = Literal["ok", "error", "timeout", "crash", "unavailable"]
DEFAULT_TIMEOUT_S = 60.0
DEFAULT_MAX_INPUT_BYTES = 64 * 1024 * 1024
STDERR_TAIL = 2000

# child exit codes (python adapters)
_EXIT_OK, _EXIT_ERROR, _EXIT_UNAVAILABLE = 0, 3, 4



@dataclass
class RuntimeSpec:
    kind: str  # one of KINDS
    model: str | None = None  # .onnx (onnxruntime, onnx_reference) or serialized engine (tensorrt)
    command: list[str] | None = None  # kind="command": argv prefix; "in.npz out.npz" are appended
    timeout_s: float = DEFAULT_TIMEOUT_S  # per call (load + every request of the call)
    perturb: float = 0.0  # FAULT INJECTION (see module doc); 0 = off
    perturb_seed: int = 0
    max_input_bytes: int = DEFAULT_MAX_INPUT_BYTES
    threads: int = 1  # onnxruntime intra-op threads (1 = deterministic, comparable latencies)
    env: dict[str, str] = field(default_factory=dict)  # extra environment for the child
    cwd: str | None = None  # where the child runs (relative model/command paths resolve here); None = caller's cwd

    @property
    def label(self) -> str:
        what = " ".join(self.command or []) if self.kind == "command" else (self.model or "?")
        fault = f" [FAULT INJECTION perturb={self.perturb:g}]" if self.perturb else ""
        return f"{self.kind}:{what}{fault}"

    def problems(self) -> list[str]:
        out = []
        if self.kind not in KINDS:
            out.append(f"unknown runtime kind {self.kind!r} (expected one of {', '.join(KINDS)})")
        if self.kind == "command" and not self.command:
            out.append("runtime kind 'command' needs a command (argv list)")
        if self.kind in ("onnxruntime", "onnx_reference", "tensorrt") and not self.model:
            out.append(f"runtime kind {self.kind!r} needs a model path")
        if not (self.timeout_s > 0):
            out.append("timeout_s must be > 0")
        if self.perturb < 0:
            out.append("perturb must be >= 0")
        if self.perturb and self.kind in ("command", "tensorrt"):
            out.append("perturb (fault injection) is only implemented for onnxruntime and onnx_reference")
        return out


@dataclass
class RunResult:
    status: RunStatus
    message: str = ""
    outputs: list[dict[str, np.ndarray]] = field(default_factory=list)  # one per input (run) / per thread (concurrent)
    latencies_s: list[float] = field(default_factory=list)  # per timed request, after warm-up
    load_s: float | None = None  # model load (python adapters)
    first_run_s: float | None = None  # first request after load (warm-up cost)
    timed_wall_s: float | None = None  # wall time of the timed loop (throughput = len(latencies)/this)
    wall_s: float = 0.0  # whole call, parent side (process start included)
    peak_rss_bytes: int | None = None  # max RSS of the runtime child process(es)
    gpu_mem_bytes: int | None = None  # device memory in use at peak (tensorrt only)
    returncode: int | None = None
    stderr_tail: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def summary(self) -> str:
        return f"{self.status}: {self.message}" if self.message else self.status


# --------------------------------------------------------------------------------------------- npz I/O


def save_npz(path: str | os.PathLike[str], arrays: Mapping[str, np.ndarray]) -> Path:
    p = Path(path)
    with open(p, "wb") as f:
        np.savez(f, **{k: np.asarray(v) for k, v in arrays.items()})
    return p


def load_npz(path: str | os.PathLike[str]) -> dict[str, np.ndarray]:
    """Load arrays (never pickles: a hostile .npz cannot run code)."""
    with np.load(path, allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


# ------------------------------------------------------------------------------------ input validation

Signature = dict[str, tuple[tuple[int | None, ...] | None, np.dtype]]  # name -> (shape, None = dynamic dim; dtype)


def validate_feed(feed: Mapping[str, np.ndarray], signature: Signature, max_input_bytes: int) -> list[str]:
    """Why `feed` is malformed for a model with `signature` (empty list = acceptable)."""
    problems: list[str] = []
    missing = [n for n in signature if n not in feed]
    unknown = [n for n in feed if n not in signature]
    if missing:
        problems.append(f"missing input(s): {', '.join(missing)}")
    if unknown:
        problems.append(f"unknown input(s): {', '.join(unknown)}")
    total = 0
    for name, arr in feed.items():
        if name not in signature:
            continue
        shape, dtype = signature[name]
        total += int(arr.nbytes)
        if arr.dtype != dtype:
            problems.append(f"input {name!r}: dtype {arr.dtype} but the model takes {dtype}")
        if arr.size == 0:
            problems.append(f"input {name!r}: empty (shape {tuple(arr.shape)})")
        if shape is not None:
            if arr.ndim != len(shape):
                problems.append(f"input {name!r}: rank {arr.ndim} (shape {tuple(arr.shape)}) but the model takes rank {len(shape)}")
            else:
                for axis, (want, got) in enumerate(zip(shape, arr.shape)):
                    if want is not None and want != got:
                        problems.append(f"input {name!r}: dimension {axis} is {got} but the model takes {want}")
        if arr.dtype.kind in "fc" and arr.size and not np.isfinite(arr).all():
            problems.append(f"input {name!r}: contains NaN or Inf")
    if total > max_input_bytes:
        problems.append(f"inputs total {total} bytes, over the {max_input_bytes}-byte cap (oversized)")
    return problems


# ------------------------------------------------------------------------------------ child processes


class _Child:
    """One child process in its own process group; stdout/stderr go to files (no pipe can fill and block)."""

    def __init__(self, argv: list[str], workdir: Path, env: dict[str, str], tag: str, cwd: str):
        self.out_path = workdir / f"{tag}.stdout"
        self.err_path = workdir / f"{tag}.stderr"
        self.started = time.perf_counter()
        self.ended: float | None = None
        self.status: int | None = None  # raw wait status
        self.rss: int | None = None
        self.timed_out = False
        self.spawn_error: str | None = None
        try:
            with open(self.out_path, "wb") as out, open(self.err_path, "wb") as err:
                self.proc: subprocess.Popen[bytes] | None = subprocess.Popen(
                    argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err, cwd=cwd, env=env, start_new_session=True
                )
        except OSError as exc:
            self.proc = None
            self.spawn_error = f"cannot start {argv[0]!r}: {exc.strerror or exc}"
            self.ended = time.perf_counter()

    @property
    def done(self) -> bool:
        return self.ended is not None

    def poll(self) -> bool:
        if self.done:
            return True
        assert self.proc is not None
        # WNOWAIT: the exited child stays a zombie, so its pid (= process-group id) cannot be reused
        # before we kill what it left behind in its group and reap it.
        if os.waitid(os.P_PID, self.proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None:
            return False
        self._kill_group()  # grandchildren left behind by the runtime go too
        self._reap()
        return True

    def _reap(self) -> None:
        assert self.proc is not None
        _, status, usage = os.wait4(self.proc.pid, 0)
        self.ended = time.perf_counter()
        self.status = status
        self.rss = int(usage.ru_maxrss) * (1 if sys.platform == "darwin" else 1024)
        self.proc.returncode = os.waitstatus_to_exitcode(status)  # so Popen never waits on a reaped pid

    def _kill_group(self) -> None:
        assert self.proc is not None
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def cut(self) -> None:
        """Timeout: kill the whole process group, then reap."""
        if self.done or self.proc is None:
            return
        self.timed_out = True
        self._kill_group()
        self._reap()

    @property
    def elapsed(self) -> float:
        return (self.ended or time.perf_counter()) - self.started

    @property
    def returncode(self) -> int | None:
        return None if self.proc is None else self.proc.returncode

    def stderr_tail(self) -> str:
        try:
            data = self.err_path.read_bytes()[-STDERR_TAIL:]
        except OSError:
            return ""
        return data.decode("utf-8", "replace").strip()


def _wait_all(children: Sequence[_Child], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    delay = 0.002
    try:
        while True:
            pending = [c for c in children if not c.poll()]
            if not pending:
                return
            if time.monotonic() >= deadline:
                for c in pending:
                    c.cut()
                return
            time.sleep(min(delay, max(0.0, deadline - time.monotonic())))
            delay = min(delay * 2, 0.05)
    except BaseException:  # KeyboardInterrupt or a bug: never leave a runtime running behind us
        for c in children:
            c.cut()
        raise


def _child_env(spec: RuntimeSpec) -> dict[str, str]:
    env = dict(os.environ)
    pkg_root = str(Path(__file__).resolve().parents[2])  # the folder holding `trtls/`
    env["PYTHONPATH"] = pkg_root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["TRTLS_MAX_INPUT_BYTES"] = str(spec.max_input_bytes)
    env.update(spec.env)
    return env


def _cwd(spec: RuntimeSpec) -> str:
    return str(Path(spec.cwd).resolve()) if spec.cwd else os.getcwd()


def _classify_exit(child: _Child, timeout_s: float) -> tuple[RunStatus, str] | None:
    """timeout / crash / spawn failure, or None when the child exited by itself."""
    if child.spawn_error:
        return "unavailable", child.spawn_error
    if child.timed_out:
        return "timeout", f"timed out after {timeout_s:g} s; the runtime's process group was killed"
    rc = child.returncode
    if rc is not None and rc < 0:
        try:
            name = signal.Signals(-rc).name
        except ValueError:
            name = f"signal {-rc}"
        return "crash", f"the runtime process died from {name}" + (f": {child.stderr_tail()[-300:]}" if child.stderr_tail() else "")
    return None


def _write_inputs(inputs: Sequence[Any], workdir: Path) -> list[Path]:
    paths = []
    for i, item in enumerate(inputs):
        if isinstance(item, Mapping):
            paths.append(save_npz(workdir / f"in{i}.npz", item))
        else:
            paths.append(Path(item).resolve())
    return paths


def _call(spec: RuntimeSpec, mode: str, inputs: Sequence[Any], *, warmup: int = 0, iterations: int = 0, concurrency: int = 1, timeout_s: float | None = None) -> RunResult:
    timeout = float(timeout_s if timeout_s is not None else spec.timeout_s)
    problems = spec.problems()
    if problems:
        return RunResult("error", "; ".join(problems))
    t0 = time.perf_counter()
    workdir = Path(tempfile.mkdtemp(prefix="trtls-rt-"))
    try:
        in_paths = _write_inputs(inputs, workdir)
        if spec.kind == "command":
            result = _call_command(spec, mode, in_paths, workdir, warmup, iterations, concurrency, timeout)
        else:
            result = _call_python(spec, mode, in_paths, workdir, warmup, iterations, concurrency, timeout)
        result.wall_s = time.perf_counter() - t0
        return result
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _call_python(spec: RuntimeSpec, mode: str, in_paths: list[Path], workdir: Path, warmup: int, iterations: int, concurrency: int, timeout: float) -> RunResult:
    n_out = len(in_paths) if mode == "run" else concurrency if mode == "concurrent" else 0
    out_paths = [workdir / f"out{i}.npz" for i in range(n_out)]
    request = {
        "spec": asdict(spec),
        "mode": mode,
        "inputs": [str(p) for p in in_paths],
        "outputs": [str(p) for p in out_paths],
        "warmup": warmup,
        "iterations": iterations,
        "concurrency": concurrency,
        "result": str(workdir / "result.json"),
    }
    req_path = workdir / "request.json"
    req_path.write_text(json.dumps(request))
    child = _Child([sys.executable, "-m", "trtls.gates.runtimes", str(req_path)], workdir, _child_env(spec), "child", _cwd(spec))
    _wait_all([child], timeout)
    base = RunResult("error", returncode=child.returncode, peak_rss_bytes=child.rss, stderr_tail=child.stderr_tail())
    bad = _classify_exit(child, timeout)
    if bad:
        base.status, base.message = bad
        return base
    try:
        record = json.loads((workdir / "result.json").read_text())
    except (OSError, ValueError):
        base.status = "crash"
        base.message = f"the runtime process exited with code {child.returncode} without a result" + (f": {base.stderr_tail[-300:]}" if base.stderr_tail else "")
        return base
    base.status = record.get("status", "error")
    base.message = record.get("message", "")
    for key in ("latencies_s", "load_s", "first_run_s", "timed_wall_s", "gpu_mem_bytes"):
        if key in record:
            setattr(base, key, record[key])
    if base.status == "ok":
        try:
            base.outputs = [load_npz(p) for p in out_paths]
        except (OSError, ValueError) as exc:
            base.status, base.message = "error", f"unreadable outputs: {exc}"
    return base


def _call_command(spec: RuntimeSpec, mode: str, in_paths: list[Path], workdir: Path, warmup: int, iterations: int, concurrency: int, timeout: float) -> RunResult:
    assert spec.command
    exe = spec.command[0]
    if not (shutil.which(exe) or (Path(_cwd(spec)) / exe).exists()):
        return RunResult("unavailable", f"command not found: {exe}")
    if mode == "probe":
        return RunResult("ok", "command found")
    env = _child_env(spec)
    deadline = time.monotonic() + timeout
    result = RunResult("ok")
    rss: list[int] = []

    def batch(jobs: list[tuple[Path, Path]], tag: str) -> list[_Child] | RunResult:
        children = [_Child([*spec.command, str(i), str(o)], workdir, env, f"{tag}{k}", _cwd(spec)) for k, (i, o) in enumerate(jobs)]
        _wait_all(children, max(0.0, deadline - time.monotonic()))
        rss.extend(c.rss for c in children if c.rss is not None)
        for c in children:
            bad = _classify_exit(c, timeout)
            if bad:
                return RunResult(bad[0], bad[1], returncode=c.returncode, stderr_tail=c.stderr_tail())
            if c.returncode != 0:
                tail = c.stderr_tail()
                return RunResult("error", f"the runner exited with code {c.returncode}" + (f": {tail[-500:]}" if tail else " (no message on stderr)"), returncode=c.returncode, stderr_tail=tail)
        return children

    def outputs_of(paths: list[Path]) -> list[dict[str, np.ndarray]] | RunResult:
        try:
            return [load_npz(p) for p in paths]
        except (OSError, ValueError) as exc:
            return RunResult("error", f"the runner exited 0 but its output is missing or unreadable: {exc}")

    if mode == "run":
        for w in range(warmup):
            got = batch([(in_paths[0], workdir / f"warm{w}.npz")], f"warm{w}_")
            if isinstance(got, RunResult):
                return _with_rss(got, rss)
            if w == 0:
                result.first_run_s = got[0].elapsed
        outs = [workdir / f"out{i}.npz" for i in range(len(in_paths))]
        for i, (ip, op) in enumerate(zip(in_paths, outs)):
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
    elif mode == "concurrent":
        outs = [workdir / f"c{i}.npz" for i in range(concurrency)]
        got = batch([(in_paths[0], o) for o in outs], "conc")
        if isinstance(got, RunResult):
            return _with_rss(got, rss)
        loaded = outputs_of(outs)
        if isinstance(loaded, RunResult):
            return _with_rss(loaded, rss)
        result.outputs = loaded
    elif mode == "bench":
        t_loop = None
        for k in range(warmup + iterations):
            if k == warmup:
                t_loop = time.perf_counter()
            got = batch([(in_paths[k % len(in_paths)], workdir / "bench.npz")], f"b{k}_")
            if isinstance(got, RunResult):
                return _with_rss(got, rss)
            if k == 0:
                result.first_run_s = got[0].elapsed
            if k >= warmup:
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


def run_inputs(spec: RuntimeSpec, inputs: Sequence[Any], *, warmup: int = 0, timeout_s: float | None = None) -> RunResult:
    """Run each input (.npz path or {name: array}) once, serially; `outputs[i]` answers `inputs[i]`.

    `warmup` untimed runs of inputs[0] come first; `latencies_s[i]` is the time of request i.
    """
    if not inputs:
        return RunResult("error", "no inputs")
    return _call(spec, "run", inputs, warmup=warmup, timeout_s=timeout_s)


def run_concurrent(spec: RuntimeSpec, inputs: Any, n: int, *, timeout_s: float | None = None) -> RunResult:
    """`n` simultaneous requests of the same input (threads in one child; `n` processes for `command`)."""
    return _call(spec, "concurrent", [inputs], concurrency=max(1, n), timeout_s=timeout_s)


def benchmark(spec: RuntimeSpec, inputs: Sequence[Any], *, warmup: int = 3, iterations: int = 20, timeout_s: float | None = None) -> RunResult:
    """Latency of `iterations` serial requests (cycling through `inputs`) after `warmup` untimed ones."""
    if not inputs:
        return RunResult("error", "no inputs")
    return _call(spec, "bench", inputs, warmup=warmup, iterations=max(1, iterations), timeout_s=timeout_s)


# ------------------------------------------------------------------------------- inside the child only


class Unavailable(Exception):
    """The runtime cannot run here (no TensorRT, no cuda-python, no GPU, engine refused by this device)."""


class _Adapter:
    signature: Signature

    def runner(self) -> Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]]:  # one per thread
        raise NotImplementedError

    def close(self) -> None:
        pass

    gpu_mem_bytes: int | None = None


_ONNX_DTYPES = {
    "tensor(float)": np.float32, "tensor(double)": np.float64, "tensor(float16)": np.float16,
    "tensor(int64)": np.int64, "tensor(int32)": np.int32, "tensor(int16)": np.int16, "tensor(int8)": np.int8,
    "tensor(uint8)": np.uint8, "tensor(uint16)": np.uint16, "tensor(uint32)": np.uint32, "tensor(uint64)": np.uint64,
    "tensor(bool)": np.bool_,
}


class _OrtAdapter(_Adapter):
    def __init__(self, spec: RuntimeSpec):
        import onnxruntime as ort

        opts = ort.SessionOptions()
        opts.intra_op_num_threads = max(1, spec.threads)
        opts.inter_op_num_threads = 1
        opts.log_severity_level = 3
        self.sess = ort.InferenceSession(spec.model, sess_options=opts, providers=["CPUExecutionProvider"])
        self.signature = {}
        for i in self.sess.get_inputs():
            shape = tuple(d if isinstance(d, int) and d >= 0 else None for d in i.shape) if i.shape is not None else None
            if i.type not in _ONNX_DTYPES:
                raise RuntimeError(f"input {i.name!r} has unsupported type {i.type}")
            self.signature[i.name] = (shape, np.dtype(_ONNX_DTYPES[i.type]))
        self.output_names = [o.name for o in self.sess.get_outputs()]

    def runner(self):
        def run(feed):
            return dict(zip(self.output_names, self.sess.run(self.output_names, feed)))

        return run


class _ReferenceAdapter(_Adapter):
    def __init__(self, spec: RuntimeSpec):
        import onnx
        from onnx import helper
        from onnx.reference import ReferenceEvaluator  # noqa: F401 - fail here, not per request, when it is missing

        model = onnx.load(spec.model)
        initializers = {t.name for t in model.graph.initializer}
        self.signature = {}
        for vi in model.graph.input:
            if vi.name in initializers:
                continue
            tt = vi.type.tensor_type
            dtype = np.dtype(helper.tensor_dtype_to_np_dtype(tt.elem_type))
            shape = tuple(d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim) if tt.HasField("shape") else None
            self.signature[vi.name] = (shape, dtype)
        self.model = model

    def runner(self):
        from onnx.reference import ReferenceEvaluator

        ev = ReferenceEvaluator(self.model)  # one per thread: the evaluator is not documented thread-safe

        def run(feed):
            outs = ev.run(None, feed)
            return {name: np.asarray(v) for name, v in zip(ev.output_names, outs)}

        return run


def _cuda_check(cudart: Any, result: Any, what: str) -> Any:
    err, *rest = result if isinstance(result, tuple) else (result,)
    if int(err) != 0:  # cudaSuccess
        raise RuntimeError(f"{what} failed: {err}")
    return rest[0] if len(rest) == 1 else tuple(rest)


class _TensorRTAdapter(_Adapter):
    """TensorRT 10 execution: deserialize, one execution context per thread, `execute_async_v3` on a stream.

    Cannot run on this project's CI (no CUDA driver); every missing piece becomes `Unavailable(reason)`.
    """

    def __init__(self, spec: RuntimeSpec):
        engine_path = Path(spec.model or "")
        if not engine_path.is_file():
            raise FileNotFoundError(f"engine not found: {engine_path}")
        from ..build.adapter import BuilderUnavailable, load_builder_module  # the one module that imports TensorRT

        try:
            trt = load_builder_module("auto").trt
        except BuilderUnavailable as exc:
            raise Unavailable(str(exc)) from None
        try:
            from cuda.bindings import runtime as cudart  # type: ignore[import-not-found]  # cuda-python >= 12.6
        except ImportError:
            try:
                from cuda import cudart  # type: ignore[import-not-found,no-redef]  # older cuda-python
            except ImportError:
                raise Unavailable("cuda-python is not installed (pip install 'trtls[gpu]'); device buffers need it") from None
        try:
            count = _cuda_check(cudart, cudart.cudaGetDeviceCount(), "cudaGetDeviceCount")
        except RuntimeError as exc:
            raise Unavailable(f"no usable CUDA device ({exc})") from None
        if not count:
            raise Unavailable("no CUDA device found")
        self.trt, self.cudart = trt, cudart
        free0, total = _cuda_check(cudart, cudart.cudaMemGetInfo(), "cudaMemGetInfo")
        self._used0 = total - free0
        self.logger = trt.Logger(trt.Logger.WARNING)
        self.runtime = trt.Runtime(self.logger)
        self.engine = self.runtime.deserialize_cuda_engine(engine_path.read_bytes())
        if self.engine is None:
            raise Unavailable(f"TensorRT {getattr(trt, '__version__', '?')} refused the engine on this device (built for another GPU, TensorRT version or hardware-compatibility level)")
        self.names = [self.engine.get_tensor_name(i) for i in range(self.engine.num_io_tensors)]
        self.inputs = [n for n in self.names if self.engine.get_tensor_mode(n) == trt.TensorIOMode.INPUT]
        self.outputs = [n for n in self.names if n not in self.inputs]
        self.signature = {}
        for n in self.inputs:
            shape = tuple(d if d >= 0 else None for d in self.engine.get_tensor_shape(n))
            self.signature[n] = (shape, np.dtype(trt.nptype(self.engine.get_tensor_dtype(n))))
        self._lock = threading.Lock()
        self.gpu_mem_bytes = 0

    def _note_memory(self) -> None:
        free, total = _cuda_check(self.cudart, self.cudart.cudaMemGetInfo(), "cudaMemGetInfo")
        with self._lock:
            self.gpu_mem_bytes = max(self.gpu_mem_bytes or 0, total - free - self._used0)

    def runner(self):
        trt, cudart = self.trt, self.cudart
        context = self.engine.create_execution_context()  # contexts are not thread-safe: one per thread
        stream = _cuda_check(cudart, cudart.cudaStreamCreate(), "cudaStreamCreate")
        h2d = cudart.cudaMemcpyKind.cudaMemcpyHostToDevice
        d2h = cudart.cudaMemcpyKind.cudaMemcpyDeviceToHost

        def run(feed):
            buffers = []
            try:
                host_in = {}
                for n in self.inputs:
                    arr = np.ascontiguousarray(feed[n])
                    host_in[n] = arr
                    if not context.set_input_shape(n, tuple(arr.shape)):
                        raise RuntimeError(f"TensorRT refused shape {arr.shape} for input {n!r} (outside the optimization profile)")
                    ptr = _cuda_check(cudart, cudart.cudaMalloc(max(1, arr.nbytes)), "cudaMalloc")
                    buffers.append(ptr)
                    _cuda_check(cudart, cudart.cudaMemcpyAsync(ptr, arr.ctypes.data, arr.nbytes, h2d, stream), "cudaMemcpyAsync H2D")
                    context.set_tensor_address(n, int(ptr))
                host_out = {}
                for n in self.outputs:
                    shape = tuple(context.get_tensor_shape(n))
                    arr = np.empty(shape, dtype=trt.nptype(self.engine.get_tensor_dtype(n)))
                    ptr = _cuda_check(cudart, cudart.cudaMalloc(max(1, arr.nbytes)), "cudaMalloc")
                    buffers.append(ptr)
                    context.set_tensor_address(n, int(ptr))
                    host_out[n] = (arr, ptr)
                if not context.execute_async_v3(stream):
                    raise RuntimeError("execute_async_v3 failed (see TensorRT log on stderr)")
                for n, (arr, ptr) in host_out.items():
                    _cuda_check(cudart, cudart.cudaMemcpyAsync(arr.ctypes.data, ptr, arr.nbytes, d2h, stream), "cudaMemcpyAsync D2H")
                _cuda_check(cudart, cudart.cudaStreamSynchronize(stream), "cudaStreamSynchronize")
                self._note_memory()
                return {n: arr for n, (arr, _) in host_out.items()}
            finally:
                for ptr in buffers:
                    cudart.cudaFree(ptr)

        return run


_ADAPTERS: dict[str, Callable[[RuntimeSpec], _Adapter]] = {
    "onnxruntime": _OrtAdapter,
    "onnx_reference": _ReferenceAdapter,
    "tensorrt": _TensorRTAdapter,
}


class _Refused(Exception):
    """A malformed input refused before running (the documented clean rejection)."""


def _child_main(request_path: str) -> int:
    req = json.loads(Path(request_path).read_text())
    spec = RuntimeSpec(**req["spec"])
    result_path = Path(req["result"])
    record: dict[str, Any] = {"status": "ok", "message": ""}

    def finish(status: str, message: str, code: int) -> int:
        record["status"], record["message"] = status, message
        result_path.write_text(json.dumps(record))
        return code

    try:
        t = time.perf_counter()
        adapter = _ADAPTERS[spec.kind](spec)
        record["load_s"] = time.perf_counter() - t
    except Unavailable as exc:
        return finish("unavailable", str(exc), _EXIT_UNAVAILABLE)
    except Exception as exc:  # noqa: BLE001 - any load failure is a clean error for the caller
        return finish("error", f"cannot load the model: {type(exc).__name__}: {exc}", _EXIT_ERROR)
    if req["mode"] == "probe":
        return finish("ok", "loaded", _EXIT_OK)

    rng = np.random.default_rng(spec.perturb_seed)
    rng_lock = threading.Lock()

    def prepared(path: str) -> dict[str, np.ndarray]:
        try:
            feed = load_npz(path)
        except Exception as exc:  # noqa: BLE001
            raise _Refused(f"unreadable input {Path(path).name}: {exc}") from None
        problems = validate_feed(feed, adapter.signature, spec.max_input_bytes)
        if problems:
            raise _Refused("malformed input refused: " + "; ".join(problems))
        return feed

    def inject(outputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        if not spec.perturb:
            return outputs
        with rng_lock:  # FAULT INJECTION: deliberate drift, see module doc
            return {k: (v + spec.perturb * rng.standard_normal(v.shape)).astype(v.dtype) if v.dtype.kind == "f" else v for k, v in outputs.items()}

    try:
        feeds = [prepared(p) for p in req["inputs"]]
        run = adapter.runner()
        mode, outs = req["mode"], req["outputs"]
        if mode == "run":
            for w in range(req["warmup"]):
                t = time.perf_counter()
                run(feeds[0])
                if w == 0:
                    record["first_run_s"] = time.perf_counter() - t
            lat = []
            for feed, out in zip(feeds, outs):
                t = time.perf_counter()
                result = run(feed)
                lat.append(time.perf_counter() - t)
                save_npz(out, inject(result))
            record.setdefault("first_run_s", lat[0] if lat else None)
            record["latencies_s"] = lat
        elif mode == "bench":
            lat = []
            t_loop = None
            for k in range(req["warmup"] + req["iterations"]):
                if k == req["warmup"]:
                    t_loop = time.perf_counter()
                t = time.perf_counter()
                run(feeds[k % len(feeds)])
                dt = time.perf_counter() - t
                if k == 0:
                    record["first_run_s"] = dt
                if k >= req["warmup"]:
                    lat.append(dt)
            record["latencies_s"] = lat
            record["timed_wall_s"] = time.perf_counter() - t_loop if t_loop is not None else None
        elif mode == "concurrent":
            n = req["concurrency"]
            runners = [run] + [adapter.runner() for _ in range(n - 1)]
            results: list[Any] = [None] * n
            barrier = threading.Barrier(n)

            def worker(k: int) -> None:
                try:
                    barrier.wait(timeout=30)
                    results[k] = runners[k](feeds[0])
                except Exception as exc:  # noqa: BLE001
                    results[k] = exc

            threads = [threading.Thread(target=worker, args=(k,)) for k in range(n)]
            for th in threads:
                th.start()
            for th in threads:
                th.join()
            for k, r in enumerate(results):
                if isinstance(r, Exception):
                    return finish("error", f"concurrent request {k} failed: {type(r).__name__}: {r}", _EXIT_ERROR)
                save_npz(outs[k], inject(r))
        else:
            return finish("error", f"unknown mode {mode!r}", _EXIT_ERROR)
    except _Refused as exc:
        return finish("error", str(exc), _EXIT_ERROR)
    except Exception as exc:  # noqa: BLE001 - the runtime raised: a clean error, reported with its type
        return finish("error", f"{type(exc).__name__}: {str(exc)[:1000]}", _EXIT_ERROR)
    if adapter.gpu_mem_bytes is not None:
        record["gpu_mem_bytes"] = adapter.gpu_mem_bytes
    return finish("ok", "", _EXIT_OK)


if __name__ == "__main__":  # pragma: no cover - exercised through child processes
    sys.exit(_child_main(sys.argv[1]))
