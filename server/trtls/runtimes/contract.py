"""The runtime contract: what a runtime is told (`RuntimeSpec`), what it answers (`RunResult`), and the
`.npz` feeds it takes, with the checks that refuse a malformed one (`validate_feed`).

Both sides of the process boundary use these: the parent (`runtime_calls`) and the child
(`runtime_child`). Kept apart so the child can load the contract without the parent's process machinery,
and so the contract can be read on its own. The contract in full is in the `trtls.runtimes` docstring.
"""

from __future__ import annotations

import io
import os
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from trtls.core.paths import real
from trtls.core.runtime_session import SESSION_OPTIONS, runtime_session
from trtls.fs import Kind, atomic_writer

KINDS = ("onnxruntime", "onnx_reference", "tensorrt", "command")
RunStatus = Literal["ok", "error", "timeout", "crash", "unavailable"]
DEFAULT_TIMEOUT_S = 60.0
DEFAULT_MAX_INPUT_BYTES = 64 * 1024 * 1024
STDERR_TAIL = 2000
GRAPH_OPTIMIZATION = ("disabled", "basic", "extended", "all")  # ONNX Runtime's GraphOptimizationLevel, by its words


@dataclass
class RuntimeSpec:
    kind: str  # one of KINDS
    model: str | None = None  # .onnx (onnxruntime, onnx_reference) or serialized engine (tensorrt)
    command: list[str] | None = None  # kind="command": argv prefix; "in.npz out.npz" are appended
    timeout_s: float = DEFAULT_TIMEOUT_S  # per call (load + every request of the call)
    perturb: float = 0.0  # FAULT INJECTION (see trtls.runtimes); 0 = off
    perturb_seed: int = 0
    max_input_bytes: int = DEFAULT_MAX_INPUT_BYTES
    # ONNX Runtime session settings (the route's runtime_options; every gate 4 run and gate 5 measurement uses them,
    # and the evidence records them: `session_settings`)
    threads: int = SESSION_OPTIONS["threads"][1]  # intra-op threads (1 = deterministic, comparable latencies)
    inter_threads: int = SESSION_OPTIONS["inter_threads"][1]  # inter-op threads (parallel branches of the graph)
    graph_optimization: str = SESSION_OPTIONS["graph_optimization"][1]  # disabled | basic | extended | all
    provider: str = SESSION_OPTIONS["provider"][1]
    env: dict[str, str] = field(default_factory=dict)  # extra environment for the child
    cwd: str | None = None  # where the child runs (relative model/command paths resolve here); None = caller's cwd
    # False: feeds go to the runtime as they are, without trtls's `validate_feed` (gate 4's malformed-input check
    # measures what the runtime under test does with them, not what trtls's own validation does)
    validate_inputs: bool = True

    def session_settings(self) -> dict[str, Any] | None:
        """What an ONNX Runtime session is created with, as evidence says it (None for other runtimes)."""
        return runtime_session(self.kind, {key: getattr(self, key) for key in SESSION_OPTIONS})

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
        for name in ("threads", "inter_threads"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                out.append(f"{name} must be a whole number >= 1 (got {value!r})")
        if self.graph_optimization not in GRAPH_OPTIMIZATION:
            out.append(f"graph_optimization {self.graph_optimization!r} is not one of {', '.join(GRAPH_OPTIMIZATION)}")
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
    # mode paired: per request, wall and CPU time of each side (cand_*, base_*) and the input index of each pair
    paired: dict[str, list[Any]] | None = None
    returncode: int | None = None
    stderr_tail: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def summary(self) -> str:
        return f"{self.status}: {self.message}" if self.message else self.status


# --------------------------------------------------------------------------------------------- npz I/O


def save_npz(
    path: str | os.PathLike[str], arrays: Mapping[str, np.ndarray], *, within: str | os.PathLike[str] | None = None
) -> Path:
    """Write `arrays` as an `.npz` (numpy's own layout: an uncompressed zip of `<name>.npy`, each array written by
    `numpy.lib.format`, never pickled), atomically and through the door: inside `within` (a runtime call's scratch
    folder; None: the file's own real folder), never through a symlink."""
    p = Path(path)
    root = within if within is not None else real(p.parent)
    with atomic_writer(p, kind=Kind.scratch, within=root) as out, zipfile.ZipFile(out, "w", allowZip64=True) as z:
        for name, value in arrays.items():  # names are data, not options
            member = io.BytesIO()
            np.lib.format.write_array(member, np.asanyarray(value), allow_pickle=False)
            z.writestr(f"{name}.npy", member.getvalue())
    return p


def load_npz(path: str | os.PathLike[str]) -> dict[str, np.ndarray]:
    """Load arrays (never pickles: a hostile .npz cannot run code) from a regular file only (`fs.open_regular`: a
    FIFO or a device named as reference inputs is refused, never waited on)."""
    from trtls.fs.models import load_npz as door_load_npz

    return door_load_npz(path)


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
                problems.append(
                    f"input {name!r}: rank {arr.ndim} (shape {tuple(arr.shape)}) but the model takes rank {len(shape)}"
                )
            else:
                for axis, (want, got) in enumerate(zip(shape, arr.shape, strict=True)):
                    if want is not None and want != got:
                        problems.append(f"input {name!r}: dimension {axis} is {got} but the model takes {want}")
        if arr.dtype.kind in "fc" and arr.size and not np.isfinite(arr).all():
            problems.append(f"input {name!r}: contains NaN or Inf")
    if total > max_input_bytes:
        problems.append(f"inputs total {total} bytes, over the {max_input_bytes}-byte cap (oversized)")
    return problems
