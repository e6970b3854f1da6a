"""The small made-up model the divergence tests share: a MatMul whose weights (~2e-7) are fp16 subnormals, between
layers fp16 holds; and the recipe that converts it to fp16."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def write_model(path: Path) -> None:
    """Five nodes; `proj_tiny` is the injected problem (the first layer fp16 cannot hold)."""
    rng = np.random.default_rng(0)
    init = [
        numpy_helper.from_array((rng.standard_normal((64, 64)) * 0.2).astype(np.float32), "W0"),
        # the injected problem: weights of ~2e-7 are fp16 subnormals (3 bits or fewer), so this layer loses ~30 %
        numpy_helper.from_array((rng.standard_normal((64, 64)) * 2e-7).astype(np.float32), "W_tiny"),
        numpy_helper.from_array(np.ones(64, np.float32), "gamma"),
        numpy_helper.from_array(np.zeros(64, np.float32), "beta"),
        numpy_helper.from_array((rng.standard_normal((64, 16)) * 0.2).astype(np.float32), "W2"),
    ]
    nodes = [
        helper.make_node("MatMul", ["x", "W0"], ["h0"], name="embed"),
        helper.make_node("Relu", ["h0"], ["a0"], name="act"),
        helper.make_node("MatMul", ["a0", "W_tiny"], ["h"], name="proj_tiny"),
        helper.make_node("LayerNormalization", ["h", "gamma", "beta"], ["n"], name="norm", axis=-1),
        helper.make_node("MatMul", ["n", "W2"], ["y"], name="head"),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 16])],
        init,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 9
    onnx.save(model, str(path))


RECIPE = """\
[engines.enc]
onnx = "models/enc.onnx"
output = "build/enc.engine"

[engines.enc.precision]
convert = "fp16"

[[engines.enc.profiles]]
input = "x"
min = [1, 64]
opt = [4, 64]
max = [8, 64]
"""
