"""The precision step's child process: NVIDIA ModelOpt AutoCast, ONNX in → mixed-precision ONNX out.

Run by the build worker as ``python -m trtls.builds.worker.autocast_child`` with one JSON line on stdin
({"input", "output", "low_precision_type", "keep_io_types", "exclude_op_types", "exclude_nodes"}); it
writes the converted model to ``output`` (a temp name the worker renames) and prints one JSON line:
{"ok": true, "modelopt_version", "nodes", "low_precision_nodes", "initializers_low"} or {"ok": false,
"kind": "missing_modelopt" | "conversion_failed", "error"}.

A child of its own because AutoCast runs in Python for as long as the model needs (it also runs ONNX
Runtime for reference outputs): a Stop kills the child at once instead of waiting for it, and ModelOpt
with its torch import never lives in the process that then runs TensorRT.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

LOW = {"fp16": 10, "bf16": 16}  # onnx.TensorProto.FLOAT16, BFLOAT16
SINGLE_FILE_LIMIT = 1_900_000_000  # protobuf's 2 GiB ceiling, with room for the graph


def _emit(record: dict[str, Any], fd: int) -> None:
    data = (json.dumps(record) + "\n").encode()
    while data:
        data = data[os.write(fd, data) :]


def save(model: Any, output: Path, within: Path) -> None:
    """The model as ONNX at `output` through the door (atomic, fsynced, inside `within`); one past protobuf's
    ceiling keeps its large tensors in `<output>.data` beside it (what `onnx.save(save_as_external_data=True)`
    writes, written here so that no file is opened but by trtls.fs)."""
    from onnx.external_data_helper import _get_all_tensors, set_external_data, uses_external_data

    from trtls.fs import Kind, atomic_write_bytes, atomic_writer

    if model.ByteSize() > SINGLE_FILE_LIMIT:
        from onnx.external_data_helper import convert_model_to_external_data

        location = output.name + ".data"
        convert_model_to_external_data(model, all_tensors_to_one_file=True, location=location)
        with atomic_writer(output.with_name(location), kind=Kind.cache, within=within) as data:
            offset = 0
            for tensor in _get_all_tensors(model):
                if uses_external_data(tensor) and tensor.HasField("raw_data"):
                    data.write(tensor.raw_data)
                    set_external_data(tensor, location, offset, len(tensor.raw_data))
                    offset += len(tensor.raw_data)
                    tensor.ClearField("raw_data")
    atomic_write_bytes(output, model.SerializeToString(), kind=Kind.cache, within=within)


def convert(job: dict[str, Any]) -> dict[str, Any]:
    try:
        from modelopt.onnx.autocast import convert_to_mixed_precision
    except Exception as exc:  # ImportError, or a broken torch underneath it
        return {
            "ok": False,
            "kind": "missing_modelopt",
            "error": f"NVIDIA ModelOpt AutoCast cannot be imported ({type(exc).__name__}: {exc})",
        }
    try:
        from importlib.metadata import version

        modelopt_version = version("nvidia-modelopt")
    except Exception:
        modelopt_version = "unknown"
    from trtls.fs.models import require_regular

    try:
        require_regular(job["input"])  # ModelOpt opens the path itself: a FIFO or a device is said, never read
    except OSError as exc:
        return {"ok": False, "kind": "conversion_failed", "error": f"{job['input']}: {exc.strerror or exc}"}
    try:
        model = convert_to_mixed_precision(
            onnx_path=job["input"],
            low_precision_type=job["low_precision_type"],
            nodes_to_exclude=job.get("exclude_nodes") or None,
            op_types_to_exclude=job.get("exclude_op_types") or None,
            keep_io_types=bool(job.get("keep_io_types", True)),
        )
    except Exception as exc:
        return {"ok": False, "kind": "conversion_failed", "error": f"{type(exc).__name__}: {exc}"}
    low = LOW[job["low_precision_type"]]
    initializers_low = sum(1 for i in model.graph.initializer if i.data_type == low)
    save(model, Path(job["output"]), Path(job.get("within") or Path(job["output"]).parent))
    casts = sum(1 for n in model.graph.node if n.op_type == "Cast")
    return {
        "ok": True,
        "modelopt_version": modelopt_version,
        "nodes": len(model.graph.node),
        "casts": casts,
        "initializers_low": initializers_low,
        "initializers": len(model.graph.initializer),
    }


def main() -> int:
    # ModelOpt logs to stdout; the one result line goes to a private copy of it (a pipe to the worker).
    out = os.dup(1)
    os.dup2(2, 1)
    line = sys.stdin.readline()
    try:
        from trtls.fs import parse_json  # here, as save()'s door imports: not before the child needs it

        job = parse_json(line)
        result = convert(job)
    except Exception as exc:
        result = {"ok": False, "kind": "conversion_failed", "error": f"{type(exc).__name__}: {exc}"}
    _emit(result, out)
    return 0 if result.get("ok") else 1


if __name__ == "__main__":
    sys.exit(main())
