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

Where the code lives (this module is the public face; each sibling is read in one sitting):

* `runtime_contract` — `RuntimeSpec`, `RunResult`, `.npz` I/O, `validate_feed` (both sides of the boundary);
* `runtime_calls`    — `probe`, `run_inputs`, `run_concurrent`, `benchmark`, `benchmark_paired`: the parent side
  of a call;
* `runtime_process`  — one child process: process group, deadline, cut, reap, exit classification;
* `runtime_adapters` — the onnxruntime, onnx_reference and tensorrt adapters (they run in the child only);
* `runtime_child`    — the child's entry point: `python -m trtls.runtimes.child REQUEST.json` (internal).
"""

from __future__ import annotations

from trtls.runtimes.adapters import Unavailable
from trtls.runtimes.calls import benchmark, benchmark_paired, probe, run_concurrent, run_inputs
from trtls.runtimes.contract import (
    DEFAULT_MAX_INPUT_BYTES,
    DEFAULT_TIMEOUT_S,
    KINDS,
    STDERR_TAIL,
    RunResult,
    RunStatus,
    RuntimeSpec,
    Signature,
    load_npz,
    save_npz,
    validate_feed,
)

__all__ = [
    "DEFAULT_MAX_INPUT_BYTES",
    "DEFAULT_TIMEOUT_S",
    "KINDS",
    "STDERR_TAIL",
    "RunResult",
    "RunStatus",
    "RuntimeSpec",
    "Signature",
    "Unavailable",
    "benchmark",
    "benchmark_paired",
    "load_npz",
    "probe",
    "run_concurrent",
    "run_inputs",
    "save_npz",
    "validate_feed",
]
