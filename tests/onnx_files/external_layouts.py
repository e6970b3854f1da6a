"""Real ONNX models (built with the onnx package, checked by onnx's checker) whose weights live in external data
files referenced from every place a tensor can be: a top-level initializer, a Constant node's `value` attribute,
an If branch's initializer, a Constant inside an If nested in an If, a Loop body's Constant, a sparse initializer,
and a Constant inside a local function. Each layout writes one external file per referenced tensor, named after
the place, so a test can change or delete exactly one."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from onnx.external_data_helper import set_external_data

LAYOUTS = ("initializer", "constant", "if-branch", "nested-if-constant", "loop-body-constant", "sparse", "function")
F4 = [4]


def external(folder: Path, name: str, values: np.ndarray, location: str, offset: int = 0) -> TensorProto:
    """A tensor whose bytes are written to `folder/location` at `offset` and referenced, not embedded."""
    tensor = numpy_helper.from_array(values, name)
    data = tensor.raw_data
    target = folder / location
    target.parent.mkdir(parents=True, exist_ok=True)
    head = target.read_bytes() if target.exists() else b""
    target.write_bytes(head.ljust(offset, b"\0") + data)
    set_external_data(tensor, location, offset, len(data))
    tensor.ClearField("raw_data")
    return tensor


def _weights(seed: int) -> np.ndarray:
    return np.arange(4, dtype=np.float32) + seed


def _constant(folder: Path, node: str, location: str, output: str) -> onnx.NodeProto:
    value = external(folder, f"{node}_w", _weights(1), location)
    return helper.make_node("Constant", [], [output], name=node, value=value)


def _if(cond: str, then_graph: onnx.GraphProto, else_graph: onnx.GraphProto, out: str, name: str) -> onnx.NodeProto:
    return helper.make_node("If", [cond], [out], name=name, then_branch=then_graph, else_branch=else_graph)


def _branch(name: str, nodes: list, out: str, inits: list | None = None) -> onnx.GraphProto:
    return helper.make_graph(nodes, name, [], [helper.make_tensor_value_info(out, TensorProto.FLOAT, F4)], inits or [])


def build(folder: Path, layout: str) -> tuple[Path, str]:
    """Write `folder/model.onnx` of `layout`; returns (model path, the external file of the layout's place)."""
    folder.mkdir(parents=True, exist_ok=True)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, F4)
    cond = helper.make_tensor_value_info("cond", TensorProto.BOOL, [])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, F4)
    inputs, inits, nodes, functions = [x], [], [], []
    place = f"{layout}.bin"
    if layout == "initializer":
        inits.append(external(folder, "w", _weights(1), place))
        nodes.append(helper.make_node("Add", ["x", "w"], ["y"]))
    elif layout == "constant":
        nodes += [_constant(folder, "c", place, "cw"), helper.make_node("Add", ["x", "cw"], ["y"])]
    elif layout in ("if-branch", "nested-if-constant"):
        inputs.append(cond)
        if layout == "if-branch":
            then = _branch("then", [helper.make_node("Add", ["x", "tw"], ["t"])], "t",
                           [external(folder, "tw", _weights(2), place)])  # fmt: skip
        else:
            inner_then = _branch("inner_then", [_constant(folder, "deep", place, "d")], "d")
            inner_else = _branch("inner_else", [helper.make_node("Identity", ["x"], ["e2"])], "e2")
            then = _branch("then", [_if("cond", inner_then, inner_else, "t", "if_inner")], "t")
        other = _branch("else", [helper.make_node("Identity", ["x"], ["e"])], "e")
        nodes.append(_if("cond", then, other, "y", "if0"))
    elif layout == "loop-body-constant":
        body = helper.make_graph(
            [_constant(folder, "k", place, "kw"), helper.make_node("Add", ["v_in", "kw"], ["v_out"]),
             helper.make_node("Identity", ["c_in"], ["c_out"])],
            "body",
            [helper.make_tensor_value_info("i", TensorProto.INT64, []),
             helper.make_tensor_value_info("c_in", TensorProto.BOOL, []),
             helper.make_tensor_value_info("v_in", TensorProto.FLOAT, F4)],
            [helper.make_tensor_value_info("c_out", TensorProto.BOOL, []),
             helper.make_tensor_value_info("v_out", TensorProto.FLOAT, F4)],
        )  # fmt: skip
        inits += [numpy_helper.from_array(np.array(2, np.int64), "trips")]
        inits += [numpy_helper.from_array(np.array(True), "go")]
        nodes.append(helper.make_node("Loop", ["trips", "go", "x"], ["y"], name="loop0", body=body))
    elif layout == "sparse":
        values = external(folder, "sw", np.array([5.0], np.float32), place)
        indices = numpy_helper.from_array(np.array([2], np.int64), "sw_idx")
        sparse = helper.make_sparse_tensor(values, indices, F4)
        nodes.append(helper.make_node("Add", ["x", "sw"], ["y"]))
        graph = helper.make_graph(nodes, "g", inputs, [y], inits, sparse_initializer=[sparse])
        return _save(folder, graph, []), place
    elif layout == "function":
        fn = helper.make_function(
            "local", "AddWeights", ["a"], ["b"],
            [_constant(folder, "fc", place, "fw"), helper.make_node("Add", ["a", "fw"], ["b"])],
            [helper.make_opsetid("", 17)],
        )  # fmt: skip
        functions.append(fn)
        nodes.append(helper.make_node("AddWeights", ["x"], ["y"], domain="local", name="call0"))
    else:
        raise ValueError(layout)
    graph = helper.make_graph(nodes, "g", inputs, [y], inits)
    return _save(folder, graph, functions), place


def _save(folder: Path, graph: onnx.GraphProto, functions: list) -> Path:
    opsets = [helper.make_opsetid("", 17)] + ([helper.make_opsetid("local", 1)] if functions else [])
    model = helper.make_model(graph, opset_imports=opsets, functions=functions)
    model.ir_version = 8
    path = folder / "model.onnx"
    onnx.save(model, path)
    onnx.checker.check_model(str(path))  # a real model: onnx's own checker reads every external reference
    return path
