"""The precision step's child process: NVIDIA ModelOpt AutoCast, ONNX in → mixed-precision ONNX out.

Run by the build worker as ``python -m trtls.builds.autocast_child`` with one JSON line on stdin
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
from typing import Any

LOW = {"fp16": 10, "bf16": 16}  # onnx.TensorProto.FLOAT16, BFLOAT16
SINGLE_FILE_LIMIT = 1_900_000_000  # protobuf's 2 GiB ceiling, with room for the graph


def _emit(record: dict[str, Any], out: Any) -> None:
    out.write(json.dumps(record) + "\n")
    out.flush()


def convert(job: dict[str, Any]) -> dict[str, Any]:
    try:
        from modelopt.onnx.autocast import convert_to_mixed_precision
    except Exception as exc:  # ImportError, or a broken torch underneath it
        return {
            "ok": False,
            "kind": "missing_modelopt",
            "error": f"NVIDIA ModelOpt AutoCast cannot be imported ({type(exc).__name__}: {exc})",
        }
    import onnx

    try:
        from importlib.metadata import version

        modelopt_version = version("nvidia-modelopt")
    except Exception:
        modelopt_version = "unknown"
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
    output = job["output"]
    if model.ByteSize() > SINGLE_FILE_LIMIT:
        onnx.save(model, output, save_as_external_data=True, location=os.path.basename(output) + ".data")
    else:
        onnx.save(model, output)
    with open(output, "rb") as fh:
        os.fsync(fh.fileno())
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
    # ModelOpt logs to stdout; the one result line goes to a private copy of it.
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    line = sys.stdin.readline()
    try:
        job = json.loads(line)
        result = convert(job)
    except Exception as exc:
        result = {"ok": False, "kind": "conversion_failed", "error": f"{type(exc).__name__}: {exc}"}
    _emit(result, out)
    return 0 if result.get("ok") else 1


if __name__ == "__main__":
    sys.exit(main())
