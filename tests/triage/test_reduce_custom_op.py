"""Issue 30, "triage that works on every failing model": a model with a custom op (a domain ONNX Runtime does not
know) is reduced with shapes from ONNX shape inference, and a tensor inference has no facts for is never a cut.
Real TensorRT-RTX reductions in the real CLI process, on models made here (tests/triage/reduce_models.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import onnx

from tests.triage.reduce_models import custom_op_between, reshape_by_its_shape_then_layernorm
from tests.triage.test_reduce_cases import _engine, _reduce

INFERRED = "shapes from ONNX shape inference: ONNX Runtime could not run the model: "


def test_a_model_with_a_missing_plugin_is_reduced_to_the_plugin_node(tmp_path: Path) -> None:
    """Four ordinary nodes, a node of domain `trt.plugins` whose plugin TensorRT-RTX does not have (its parser: `Plugin
    not found`, a parser rejection trtls classifies), four more: ONNX Runtime cannot load the model, so shape
    inference gives the shapes; the reduction ends on the plugin node alone, says which probe and why, and exits 0."""
    custom_op_between(tmp_path / "m.onnx", "MissingPlugin", 4, ["Relu", "Sigmoid", "Relu", "Sigmoid"])
    (tmp_path / "trtls.toml").write_text(_engine("m", "m.onnx", "[N, 16, 64]", smem=False))
    code, record, stderr = _reduce(tmp_path, "m")
    assert record is not None, stderr[-2000:]
    assert record["failure"]["kind"] == "parser_rejection" and record["failure"]["layer"] == "custom", record
    assert code == 0 and record["outcome"] == "reduced" and record["originalNodes"] == 9, record["causeText"]
    assert record["minimal"]["nodeNames"] == ["custom"] and record["minimal"]["inputs"] == ["a3"]
    probe = record["shapeProbe"]
    assert probe["probe"] == "onnx_shape_inference" and "MissingPlugin" in probe["reason"], probe
    assert probe["text"] == INFERRED + probe["reason"] and INFERRED in record["causeText"]
    minimal = onnx.load(str(tmp_path / ".trtls" / "reduce" / record["id"] / "minimal.onnx"))
    assert [(n.op_type, n.domain) for n in minimal.graph.node] == [("MissingPlugin", "trt.plugins")]
    (x,) = minimal.graph.input  # the cut's input has the shape inference gave it, a profiled batch
    assert [d.dim_value or d.dim_param for d in x.type.tensor_type.shape.dim] == ["d0", 16, 64]
    profile = {"input": "a3", "min": [1, 16, 64], "opt": [2, 16, 64], "max": [4, 16, 64]}
    assert record["minimal"]["profiles"] == [{"inputs": [profile]}]
    # the terminal's words: the outcome line says which probe gave the shapes and why
    text = subprocess.run(
        [sys.executable, "-m", "trtls", "reduce", str(tmp_path), "--engine", "m"], capture_output=True, text=True
    )
    assert text.returncode == 0, text.stderr[-2000:]
    assert "reduced: the model is the cause: the minimal model keeps the node(s) below" in text.stdout
    assert INFERRED + probe["reason"] in text.stdout and "Traceback" not in text.stdout + text.stderr


def test_a_tensor_shape_inference_has_no_facts_for_is_never_a_cut(tmp_path: Path) -> None:
    """A Relu of the domain `trt.plugins`: TensorRT-RTX's parser imports it (it reads the op's name), while ONNX
    Runtime and ONNX shape inference know no such op, so no tensor after it has facts. The LayerNormalization three
    nodes later fails with 32 KiB of shared memory: the reduction never cuts at a tensor after the custom node (no
    trial starts after it, no span ends between it and the model's output), and ends on the custom node and what
    follows it, its input the tensor before it."""
    custom_op_between(tmp_path / "m.onnx", "Relu", 3, ["Relu", "Sigmoid", "LayerNormalization"])
    (tmp_path / "trtls.toml").write_text(_engine("m", "m.onnx", "[N, 16, 64]", smem=True))
    code, record, stderr = _reduce(tmp_path, "m")
    assert record is not None, stderr[-2000:]
    assert record["shapeProbe"]["probe"] == "onnx_shape_inference", record["shapeProbe"]
    assert code == 0 and record["outcome"] == "configuration", record["causeText"]
    assert record["causeSettings"] == {"tactic_shared_memory_kib": 32}
    assert record["minimal"]["nodeNames"] == ["custom", "b0", "b1", "b2"] and record["minimal"]["inputs"] == ["a2"]
    custom = 3  # the custom node's place in the order: nodes a0 a1 a2 custom b0 b1 b2
    cuts = [t for t in record["trials"] if t["step"] not in ("confirm", "settings")]
    assert cuts and all(t["firstNode"] <= custom for t in cuts), cuts
    spans = [t for t in cuts if t["step"] == "outputs"]
    assert all(t["lastNode"] < custom or t["lastNode"] == 6 for t in spans), spans
    kept = tmp_path / ".trtls" / "reduce" / record["id"] / "trials"
    for path in sorted(kept.glob("*.onnx")):  # every failing candidate kept: each input typed and shaped
        for value in onnx.load(str(path)).graph.input:
            tensor = value.type.tensor_type
            assert tensor.elem_type and len(tensor.shape.dim) == 3, (path.name, value)
    on_disk = json.loads((kept.parent / "result.json").read_text())
    assert on_disk["shapeProbe"] == record["shapeProbe"]


def test_the_fallback_probe_gives_no_facts_after_an_op_it_does_not_know_and_cuts_there_are_unknown(
    tmp_path: Path,
) -> None:
    """The rule the searches follow, on the model itself: shape inference's facts stop at the custom node, so a cut
    that starts after it (its input would be a tensor with no shape) or ends before the output (an output with no
    type) says which tensors it lacks (`unknown`), while the cut from the custom node on needs none; a reason that
    carries a control character (an op's name) is recorded without it."""
    from trtls.triage.shape_inference import INFERENCE, probe_shapes
    from trtls.triage.subgraph import cut, load_graph, unknown_tensors

    custom_op_between(tmp_path / "m.onnx", "Relu", 3, ["Relu", "Sigmoid", "LayerNormalization"])
    model = onnx.load(str(tmp_path / "m.onnx"))
    profiles = [{"inputs": [{"input": "x", "min": [1, 16, 64], "opt": [2, 16, 64], "max": [4, 16, 64]}]}]
    probe = probe_shapes(model, profiles)
    assert probe.inferred and probe.record.probe == INFERENCE
    assert {"x", "a0", "a1", "a2"} <= set(probe.facts) and not {"p", "b0", "b1", "y"} & set(probe.facts)
    assert probe.facts["a2"].shapes == [{"min": [1, 16, 64], "opt": [2, 16, 64], "max": [4, 16, 64]}]
    assert not probe.facts["a2"].value_known
    graph = load_graph(model)
    assert [n.name for n in graph.nodes] == ["a0", "a1", "a2", "custom", "b0", "b1", "b2"]
    assert cut(graph, 3, 6, probe.facts, 1).unknown == ()  # from the custom node: input a2, output y as declared
    assert cut(graph, 4, 6, probe.facts, 1).unknown == ("p",)
    assert cut(graph, 6, 6, probe.facts, 1).unknown == ("b1",)
    assert cut(graph, 0, 4, probe.facts, 1, branch=False).unknown == ("b0",)
    assert unknown_tensors(graph, 0, 4, probe.facts, branch=False) == ("b0",)  # what the searches filter by
    model.graph.node[3].op_type = "Relu\x1b[2J\x07"
    reason = probe_shapes(model, profiles).record.reason or ""
    assert "Relu" in reason and not any(ord(c) < 32 or 0x7F <= ord(c) < 0xA0 for c in reason), reason


def test_a_shape_computation_whose_values_inference_never_measured_comes_along_never_an_input(tmp_path: Path) -> None:
    """Shape inference measures no value: the int64 tensors of a Shape → Gather → Unsqueeze → Concat chain (the
    reshape's target) are never frozen nor made profiled inputs — a cut from the reshape on brings the chain along,
    back to the Shape, whose float input is the cut's one input. The real reduction builds such a span (it builds,
    before the LayerNormalization) and ends on the LayerNormalization alone, the setting named."""
    from trtls.triage.shape_inference import probe_shapes
    from trtls.triage.subgraph import cut, load_graph

    reshape_by_its_shape_then_layernorm(tmp_path / "m.onnx")
    model = onnx.load(str(tmp_path / "m.onnx"))
    profiles = [{"inputs": [{"input": "x", "min": [1, 16, 64], "opt": [2, 16, 64], "max": [4, 16, 64]}]}]
    probe = probe_shapes(model, profiles)
    assert probe.inferred and probe.facts["dims"].shapes == [{"min": [2], "opt": [2], "max": [2]}]
    graph = load_graph(model)
    reshape = [n.name for n in graph.nodes].index("reshape")
    candidate = cut(graph, reshape, reshape + 2, probe.facts, 1)
    assert candidate.node_names == ["shape", "gather", "unsq", "concat", "reshape", "r1", "ln"]
    assert [i.name for i in candidate.model.graph.input] == ["a0"] and candidate.unknown == ()
    (tmp_path / "trtls.toml").write_text(_engine("m", "m.onnx", "[N, 16, 64]", smem=True))
    code, record, stderr = _reduce(tmp_path, "m")
    assert record is not None, stderr[-2000:]
    assert record["shapeProbe"]["probe"] == "onnx_shape_inference"
    assert code == 0 and record["outcome"] == "configuration", record["causeText"]
    assert record["minimal"]["nodeNames"] == ["ln"]
    spans = [t for t in record["trials"] if t["step"] == "outputs"]
    assert any(t["outcome"] == "built" and t["lastNode"] >= reshape for t in spans), spans


def test_an_unknown_ops_output_the_model_declares_is_a_cut_and_the_record_says_it_rests_on_the_declaration(
    tmp_path: Path,
) -> None:
    """The model of the test above, with the custom node's output declared as exporters write it (`value_info` p:
    float [N, 16, 64], N the input's batch): shape inference is given that declaration at each profile point and
    carries it on, so the tensors after the custom node have facts and are cuts. The LayerNormalization that 32 KiB
    of shared memory breaks is reduced to itself alone, its input b1 — past the op inference does not know — and the
    record names p as the tensor whose shape rests on the model's declaration, not on inference."""
    from onnx import TensorProto, helper

    custom_op_between(tmp_path / "m.onnx", "Relu", 3, ["Relu", "Sigmoid", "LayerNormalization"])
    model = onnx.load(str(tmp_path / "m.onnx"))
    model.graph.value_info.append(helper.make_tensor_value_info("p", TensorProto.FLOAT, ["N", 16, 64]))
    onnx.save(model, str(tmp_path / "m.onnx"))
    (tmp_path / "trtls.toml").write_text(_engine("m", "m.onnx", "[N, 16, 64]", smem=True))
    code, record, stderr = _reduce(tmp_path, "m")
    assert record is not None, stderr[-2000:]
    probe = record["shapeProbe"]
    assert probe["probe"] == "onnx_shape_inference" and probe["declared"] == ["p"], probe
    assert probe["text"].endswith(" (an unknown op's outputs as the model declares them: p)"), probe["text"]
    assert "op(an unknown" not in probe["text"]  # the reason and the declaration are two phrases
    assert code == 0 and record["outcome"] == "configuration", record["causeText"]
    assert record["minimal"]["nodeNames"] == ["b2"] and record["minimal"]["inputs"] == ["b1"], record["minimal"]
    profile = {"input": "b1", "min": [1, 16, 64], "opt": [2, 16, 64], "max": [4, 16, 64]}
    assert record["minimal"]["profiles"] == [{"inputs": [profile]}]


def test_a_declaration_in_a_dimension_no_input_names_gives_no_facts(tmp_path: Path) -> None:
    """A declared output whose dimension no input names (`[M, 16, 64]`) cannot be sized at a profile point: it stays
    as declared, and nothing after the custom node has facts (as without a declaration)."""
    from onnx import TensorProto, helper

    from trtls.triage.shape_inference import probe_shapes

    custom_op_between(tmp_path / "m.onnx", "Relu", 3, ["Relu", "Sigmoid", "LayerNormalization"])
    model = onnx.load(str(tmp_path / "m.onnx"))
    model.graph.value_info.append(helper.make_tensor_value_info("p", TensorProto.FLOAT, ["M", 16, 64]))
    profiles = [{"inputs": [{"input": "x", "min": [1, 16, 64], "opt": [2, 16, 64], "max": [4, 16, 64]}]}]
    probe = probe_shapes(model, profiles)
    assert probe.inferred and probe.record.declared is None
    assert not {"p", "b0", "b1", "y"} & set(probe.facts) and "a2" in probe.facts
