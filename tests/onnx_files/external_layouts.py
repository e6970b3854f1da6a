"""Real ONNX models (built with the onnx package, checked by onnx's checker) whose weights live in external data
files referenced from every place a tensor can be: a top-level initializer, a Constant node's `value` attribute,
an If branch's initializer, a Constant inside an If nested in an If, a Loop body's Constant, a sparse initializer,
and a Constant inside a local function — and three written as protobuf allows but onnx never writes: the graph in two
parts (`graph-in-parts`: ModelProto.graph twice, its initializer in the first), a Constant's `value` in two parts
(`constant-in-parts`: the location in one, "external" in the other) and a Constant whose attribute tag has its long
form (`constant-long-tag`: 0xAA 0x00 for 0x2A); protobuf parses each as the merge of its parts, and so does TensorRT's
parser. Each layout writes one external file per referenced tensor, named after the place, so a test can change or
delete exactly one."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from google.protobuf.internal.encoder import _VarintBytes
from onnx import TensorProto, helper, numpy_helper
from onnx.external_data_helper import set_external_data

LAYOUTS = ("initializer", "constant", "if-branch", "nested-if-constant", "loop-body-constant", "sparse", "function")
LAYOUTS += ("graph-in-parts", "constant-in-parts", "constant-long-tag")
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
    elif layout in ("graph-in-parts", "constant-in-parts", "constant-long-tag"):
        return _written_in_parts(folder, layout, place, inputs, y), place
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


def _field(number: int, body: bytes, tag: bytes | None = None) -> bytes:
    """A length-delimited field, its tag in the canonical form unless `tag` gives another."""
    return (tag or _VarintBytes((number << 3) | 2)) + _VarintBytes(len(body)) + body


def _written_in_parts(folder: Path, layout: str, place: str, inputs: list, y: onnx.ValueInfoProto) -> Path:
    if layout == "graph-in-parts":  # ModelProto.graph (7) twice: the first part holds only the initializer
        rest = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"])], "g", inputs, [y])
        first = onnx.GraphProto(initializer=[external(folder, "w", _weights(1), place)])
        return _save_raw(folder, _field(7, first.SerializeToString()) + _field(7, rest.SerializeToString()))
    value = external(folder, "cv", _weights(3), place)
    if layout == "constant-in-parts":  # AttributeProto.t (5) twice: the location in one part, "external" in the other
        located = TensorProto()
        located.CopyFrom(value)
        located.ClearField("data_location")
        held = _field(5, located.SerializeToString()) + _field(5, TensorProto(data_location=1).SerializeToString())
    else:  # AttributeProto.t with its tag in two bytes, 0xAA 0x00: the same field 5 to protobuf
        held = _field(5, value.SerializeToString(), tag=b"\xaa\x00")
    attribute = _field(1, b"value") + b"\xa0\x01\x04" + held  # name, type TENSOR (field 20), the tensor
    constant = helper.make_node("Constant", [], ["cw"], name="c").SerializeToString() + _field(5, attribute)
    rest = helper.make_graph([helper.make_node("Add", ["x", "cw"], ["y"])], "g", inputs, [y])
    return _save_raw(folder, _field(7, _field(1, constant) + rest.SerializeToString()))


def _save_raw(folder: Path, graph_fields: bytes) -> Path:
    model = helper.make_model(helper.make_graph([], "g", [], []), opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    model.ClearField("graph")
    path = folder / "model.onnx"
    path.write_bytes(model.SerializeToString() + graph_fields)
    onnx.checker.check_model(str(path))  # protobuf merged the parts: onnx's checker reads every external reference
    return path


def _save(folder: Path, graph: onnx.GraphProto, functions: list) -> Path:
    opsets = [helper.make_opsetid("", 17)] + ([helper.make_opsetid("local", 1)] if functions else [])
    model = helper.make_model(graph, opset_imports=opsets, functions=functions)
    model.ir_version = 8
    path = folder / "model.onnx"
    onnx.save(model, path)
    onnx.checker.check_model(str(path))  # a real model: onnx's own checker reads every external reference
    return path
