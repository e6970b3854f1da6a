"""Build `model.onnx` (a tiny MLP) from the checkpoint's `model.safetensors` with onnx.helper.

    input [batch, 16] float32 → Gemm(fc1) → Relu → Gemm(fc2) → logits [batch, 4]

The weights are read with the safetensors numpy API (a data format: nothing is executed or unpickled).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from safetensors.numpy import load_file

OPSET = 17


def build_onnx(weights: Path, out: Path) -> Path:
    w = load_file(str(weights))
    inits = [
        numpy_helper.from_array(np.ascontiguousarray(w[k]), k)
        for k in ("fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias")
    ]
    nodes = [
        helper.make_node("Gemm", ["input", "fc1.weight", "fc1.bias"], ["h"], transB=1, name="fc1"),
        helper.make_node("Relu", ["h"], ["h_relu"], name="relu"),
        helper.make_node("Gemm", ["h_relu", "fc2.weight", "fc2.bias"], ["logits"], transB=1, name="fc2"),
    ]
    d_in = w["fc1.weight"].shape[1]
    d_out = w["fc2.weight"].shape[0]
    graph = helper.make_graph(
        nodes,
        "tiny_mlp",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", d_in])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", d_out])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="trtls-sample")
    model.ir_version = 8
    onnx.checker.check_model(model)
    out.write_bytes(model.SerializeToString())
    return out


if __name__ == "__main__":
    here = Path(__file__).resolve().parent
    src = (
        Path(sys.argv[1])
        if len(sys.argv) > 1
        else next((here / "checkpoints" / "models--trtls--tiny-mlp" / "snapshots").glob("*/model.safetensors"))
    )
    print(build_onnx(src, here / "model.onnx"))
