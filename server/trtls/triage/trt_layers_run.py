"""The TensorRT engine's layer-wise comparison, from the parent's side: no TensorRT import here.

Whether an engine can execute on this machine is detected at runtime, before anything is built: a builder module
(`tensorrt` or `tensorrt_rtx`), a CUDA driver with a device (libcuda, through ctypes), a CUDA runtime for the copies
(libcudart). When one is missing the answer is `not_checked` with that reason — never a verdict. Otherwise the work
runs in a child process (`python -m trtls.triage.trt_layers`, the only place TensorRT is imported), stopped by the
search's cancel token like the conversion's child; the child can still answer `not_checked` (TensorRT refused the
device: the engine did not deserialize, with TensorRT's own error).
"""

from __future__ import annotations

import importlib.util
import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import ValidationError

from trtls.builds.cuda import cuda_driver, cuda_runtime
from trtls.builds.killable import ran_to_the_end
from trtls.builds.roots import state_root
from trtls.core.triage_records import TensorrtLayers
from trtls.fs import Kind, UnreadableRecord, atomic_write_bytes, atomic_write_text, ensure_folder, read_json_record
from trtls.fs.capture import new_file

RESULT_LIMIT = 64 << 20  # the child's comparison: every tensor's statistics, far below this

UNAVAILABLE = "TensorRT execution unavailable here"


def execution_blocker() -> str | None:
    """Why no TensorRT engine can run on this machine, detected now; None when nothing known stops it."""
    if not any(importlib.util.find_spec(name) for name in ("tensorrt", "tensorrt_rtx")):
        return "no TensorRT Python module (tensorrt or tensorrt_rtx) is installed"
    driver = cuda_driver()
    if driver["cuda_driver"] is None:
        return "no CUDA driver (libcuda.so.1 is not loadable): no GPU to run an engine on"
    if driver["device_name"] is None:
        return f"the CUDA driver {driver['cuda_driver']} found no usable device (cuInit failed): no GPU"
    if cuda_runtime() is None:
        return "no CUDA runtime (libcudart) to copy inputs and outputs to and from the device"
    return None


def not_checked(reason: str, **extra: Any) -> dict[str, Any]:
    return {"status": "not_checked", "reason": f"{UNAVAILABLE}: {reason}", **extra}


def tensorrt_layers(
    reference: Path,
    converted: Path,
    feed: dict[str, np.ndarray],
    folder: Path,
    token: Any,
    rtol: float,
    output_tolerances: dict[str, tuple[float, float]],
) -> TensorrtLayers:
    """`not_checked` with its reason, or the child's comparison (`compared`, its firstDiverging, …)."""
    blocker = execution_blocker()
    if blocker is not None:
        return TensorrtLayers.model_validate(not_checked(blocker, detected="before building: " + blocker.split(":")[0]))
    work = folder / "tensorrt"
    root = state_root(work)  # the recipe's folder: `.trtls/reduce/<id>/tensorrt` stays inside it
    ensure_folder(work, within=root)
    npz = io.BytesIO()
    save: Any = np.savez  # numpy's stub types **arrays as its keyword flags
    save(npz, **feed)
    atomic_write_bytes(work / "inputs.npz", npz.getvalue(), kind=Kind.evidence, within=root)
    job = {
        "reference": str(reference),
        "onnx": str(converted),
        "inputs": str(work / "inputs.npz"),
        "builder": os.environ.get("TRTLS_BUILDER_MODULE", "auto"),
        "rtol": rtol,
        "outputTolerances": {k: list(v) for k, v in output_tolerances.items()},
        "result": str(work / "result.json"),
    }
    atomic_write_text(work / "job.json", json.dumps(job), kind=Kind.evidence, within=root)
    with new_file(work / "child.log", kind=Kind.evidence, within=root) as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "trtls.triage.trt_layers", str(work / "job.json")],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # a stop ends the child and what it started
        )
        if not ran_to_the_end(proc, token):
            return TensorrtLayers(status="cancelled", reason=f"stopped by {token.source}")
    return child_answer(work / "result.json", proc.returncode, root)


def child_answer(path: Path, returncode: int | None, root: Path) -> TensorrtLayers:
    """The child's result.json as the comparison it must be; a missing one, or one that is not a comparison (the
    child is another process: its file is read like any record), is an `error` saying so, never the search's end."""
    try:
        data = read_json_record(path, limit=RESULT_LIMIT, within=root)
    except UnreadableRecord:
        return TensorrtLayers(status="error", reason=f"the TensorRT child ended (exit {returncode}) without a result")
    try:
        return TensorrtLayers.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "the record"
        return TensorrtLayers(status="error", reason=f"the TensorRT child's result {path}: {where}: {first['msg']}")
