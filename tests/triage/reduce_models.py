"""The small models the reduction tests make with onnx.helper and share: a chain whose last node, a
LayerNormalization, is the one TensorRT-RTX fails (with 32 KiB of tactic shared memory), a chain with a node of a
custom domain in the middle (ONNX Runtime and ONNX shape inference know no op there), and a reshape by a shape
computed from its input beside such a node; and the quickstart's `demo` alone, failing on that setting
(`failing_demo`)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

PLUGIN_DOMAIN = "trt.plugins"
QUICKSTART = Path(__file__).resolve().parents[2] / "samples" / "quickstart"
SMEM = "[engines.demo.builder]\noptimization_level = 3\n"


def failing_demo(tmp_path: Path) -> Path:
    """The quickstart with its one engine `demo`, which TensorRT-RTX fails to build with 32 KiB of tactic shared
    memory (a setting's failure: the cause a reduction finds)."""
    ws = tmp_path / "q"
    shutil.copytree(QUICKSTART, ws, ignore=shutil.ignore_patterns(".trtls", "build", "large.onnx"))
    text = (ws / "trtls.toml").read_text()
    text = text[: text.index("[engines.large]")]  # one engine
    (ws / "trtls.toml").write_text(
        text.replace(SMEM, SMEM + "memory_pool_limits = { tactic_shared_memory_kib = 32 }\n")
    )
    return ws


def save(model: onnx.ModelProto, path: Path) -> None:
    onnx.checker.check_model(model)
    onnx.save(model, str(path))


def save_chain(
    path: Path, nodes: list[onnx.NodeProto], name: str, weights: list[onnx.TensorProto], domains: tuple[str, ...] = ()
) -> None:
    """Save the graph of `nodes` from input x to output y, both float [N, 16, 64], at opset 17 (and opset 1 of each
    custom domain in `domains`)."""
    value = helper.make_tensor_value_info
    graph = helper.make_graph(
        nodes,
        name,
        [value("x", TensorProto.FLOAT, ["N", 16, 64])],
        [value("y", TensorProto.FLOAT, ["N", 16, 64])],
        weights,
    )
    opsets = [helper.make_opsetid("", 17), *(helper.make_opsetid(d, 1) for d in domains)]
    save(helper.make_model(graph, opset_imports=opsets), path)


def layernorm_weights() -> list[onnx.TensorProto]:
    return [
        numpy_helper.from_array(np.ones(64, np.float32), "g"),
        numpy_helper.from_array(np.zeros(64, np.float32), "b"),
    ]


def layernorm_last(path: Path, depth: int = 30) -> None:
    """x → c1 … c{depth} (Sigmoid, Relu in turn) → ln (LayerNormalization, which TensorRT-RTX fails with 32 KiB of
    tactic shared memory) → y: the failure is the last node, and every span before it builds."""
    nodes, prev = [], "x"
    for i in range(1, depth + 1):
        nodes.append(helper.make_node("Sigmoid" if i % 2 else "Relu", [prev], [f"c{i}"], name=f"c{i}"))
        prev = f"c{i}"
    nodes.append(helper.make_node("LayerNormalization", [prev, "g", "b"], ["y"], name="ln", axis=-1))
    save_chain(path, nodes, "layernorm_last", layernorm_weights())


def custom_op_between(path: Path, op: str, before: int, after: list[str]) -> None:
    """x → a0 … a{before-1} (Relu, Sigmoid in turn) → `op` of the domain `trt.plugins` (node `custom`, output `p`)
    → one node per op of `after` (named b0, b1 …; a LayerNormalization reads the weights g, b) → y [N, 16, 64]."""
    nodes, prev = [], "x"
    for i in range(before):
        nodes.append(helper.make_node("Sigmoid" if i % 2 else "Relu", [prev], [f"a{i}"], name=f"a{i}"))
        prev = f"a{i}"
    nodes.append(helper.make_node(op, [prev], ["p"], name="custom", domain=PLUGIN_DOMAIN))
    prev = "p"
    for i, after_op in enumerate(after):
        made = "y" if i == len(after) - 1 else f"b{i}"
        reads = [prev, "g", "b"] if after_op == "LayerNormalization" else [prev]
        nodes.append(helper.make_node(after_op, reads, [made], name=f"b{i}"))
        prev = made
    weights = layernorm_weights() if "LayerNormalization" in after else []
    save_chain(path, nodes, "custom_op_between", weights, (PLUGIN_DOMAIN,))


def reshape_by_its_shape_then_layernorm(path: Path) -> None:
    """x → a0 (Sigmoid) → its batch size (Shape, Gather, Unsqueeze, Concat with 1024: int64 shape arithmetic) →
    reshape [N, 1024] → r1 (Relu) → ln (LayerNormalization over 1024) → output l; beside it, a Relu of the domain
    `trt.plugins` on x → output p (TensorRT-RTX's parser imports it by its name; ONNX Runtime cannot load it)."""
    nodes = [
        helper.make_node("Sigmoid", ["x"], ["a0"], name="a0"),
        helper.make_node("Shape", ["a0"], ["s"], name="shape"),
        helper.make_node("Gather", ["s", "zero"], ["n"], name="gather", axis=0),
        helper.make_node("Unsqueeze", ["n", "zero"], ["n1"], name="unsq"),
        helper.make_node("Concat", ["n1", "rest"], ["dims"], name="concat", axis=0),
        helper.make_node("Reshape", ["a0", "dims"], ["r"], name="reshape"),
        helper.make_node("Relu", ["r"], ["r1"], name="r1"),
        helper.make_node("LayerNormalization", ["r1", "g", "b"], ["l"], name="ln", axis=-1),
        helper.make_node("Relu", ["x"], ["p"], name="custom", domain=PLUGIN_DOMAIN),
    ]
    value = helper.make_tensor_value_info
    graph = helper.make_graph(
        nodes,
        "reshape_by_its_shape",
        [value("x", TensorProto.FLOAT, ["N", 16, 64])],
        [value("l", TensorProto.FLOAT, ["N", 1024]), value("p", TensorProto.FLOAT, ["N", 16, 64])],
        [
            numpy_helper.from_array(np.array(0, np.int64), "zero"),
            numpy_helper.from_array(np.array([1024], np.int64), "rest"),
            numpy_helper.from_array(np.ones(1024, np.float32), "g"),
            numpy_helper.from_array(np.zeros(1024, np.float32), "b"),
        ],
    )
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid(PLUGIN_DOMAIN, 1)]
    save(helper.make_model(graph, opset_imports=opsets), path)
