"""Issue 30's "no more trials than Polygraphy's bisect": the user's own failed build of the same engine key is the
first trial (not built again), and the search is the two bisections alone — no first-node trial before them, no
branch trial, no linear pass — with one trial on the first node only where the outputs bisection never built it.
Real TensorRT-RTX builds and reductions in the real CLI process."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

from .test_reduce_cases import _chain, _engine, _if_first, _reduce, _two_outputs


def _build(ws: Path, engine: str) -> str:
    """`trtls build` as the user runs it (it fails); the id of its evidence."""
    proc = subprocess.run(
        [sys.executable, "-m", "trtls", "build", str(ws), "--engine", engine, "--json"], capture_output=True, text=True
    )
    assert proc.returncode == 1, proc.stderr[-2000:]
    (run,) = [p for p in (ws / ".trtls" / "runs").iterdir() if p.name.startswith(f"{engine}-")]
    assert json.loads((run / "summary.json").read_text())["outcome"] == "failed"
    return run.name


def test_the_users_failed_build_of_the_same_key_is_the_first_trial(tmp_path: Path) -> None:
    ops = [("Relu", "relu"), ("Sigmoid", "sig"), ("Det", "det"), ("Neg", "neg"), ("Abs", "abs")]
    _chain(tmp_path / "m.onnx", ops, ["N", 4, 4], ["N"])
    (tmp_path / "trtls.toml").write_text(_engine("m", "m.onnx", "[N, 4, 4]", smem=False))
    build_id = _build(tmp_path, "m")
    code, record, stderr = _reduce(tmp_path, "m")
    assert record is not None, stderr[-2000:]
    first = record["trials"][0]
    assert first["step"] == "confirm" and first.get("reused") and first["buildId"] == build_id
    assert record["reusedBuild"] == build_id and record["trialsBuilt"] == len(record["trials"]) - 1 == 1
    assert code == 0 and record["minimal"]["nodeNames"] == ["det"]
    # the recipe changed (another engine key): that build is not this one, the whole model is built again
    recipe = tmp_path / "trtls.toml"
    recipe.write_text(recipe.read_text() + "[engines.m.builder]\noptimization_level = 2\n")
    code, record, stderr = _reduce(tmp_path, "m")
    assert record is not None, stderr[-2000:]
    assert record["reusedBuild"] is None and not record["trials"][0].get("reused")
    assert record["trials"][0]["buildId"].startswith(record["id"])  # confirm, named_node: both built (no settings
    assert record["trialsBuilt"] == len(record["trials"]) == 2  # trial: the parser rejects Det before any setting)


def test_the_search_is_the_two_bisections_and_the_settings(tmp_path: Path) -> None:
    """The two-output model with 32 KiB of tactic shared memory: its LayerNormalization branch is reduced to `ln`
    and the setting named, within Polygraphy's bisect bound plus the one settings trial."""
    _two_outputs(tmp_path / "m.onnx")
    (tmp_path / "trtls.toml").write_text(_engine("m", "m.onnx", "[N, 16, 64]", smem=True))
    _build(tmp_path, "m")
    code, record, stderr = _reduce(tmp_path, "m")
    assert record is not None, stderr[-2000:]
    assert code == 0 and record["minimal"]["nodeNames"] == ["ln"] and record["causeSettings"]
    steps = [t["step"] for t in record["trials"]]
    assert set(steps) <= {"confirm", "outputs", "first_node", "inputs", "settings"}, steps
    assert steps.count("settings") == 1 and record["trials"][0].get("reused")
    assert record["trialsBuilt"] <= 2 * math.ceil(math.log2(record["originalNodes"])) + 1, steps


def test_a_failing_first_node_is_found_by_one_trial_after_the_outputs_bisection(tmp_path: Path) -> None:
    """The bisection assumes the first node alone passes and ends at the first two nodes; one trial of the first
    node alone finds it (Polygraphy's bisect keeps both)."""
    _if_first(tmp_path / "m.onnx", after=4)
    (tmp_path / "trtls.toml").write_text(_engine("m", "m.onnx", "[N, 16]", smem=False))
    code, record, stderr = _reduce(tmp_path, "m")
    assert record is not None, stderr[-2000:]
    assert code == 0 and record["minimal"]["nodeNames"] == ["if"]
    steps = [t["step"] for t in record["trials"]]
    assert steps[-1] == "first_node" and set(steps) == {"confirm", "outputs", "first_node"}, steps


def test_a_span_ends_only_where_a_network_makes_a_float_tensor_or_at_control_flow() -> None:
    """The outputs bisection's points: integer shape arithmetic (Shape, Gather, Cast to int64, Concat) is skipped —
    Polygraphy folds it before it bisects — while a float node and an If are kept (the probe's own dtypes)."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    from trtls.triage.cut_search import span_ends
    from trtls.triage.probe import probe_tensors
    from trtls.triage.reduce_build import _compute_indices
    from trtls.triage.subgraph import load_graph

    value = helper.make_tensor_value_info
    then = helper.make_graph(
        [helper.make_node("Identity", ["r"], ["t"], name="then_id")], "then", [], [value("t", TensorProto.FLOAT, None)]
    )
    other = helper.make_graph(
        [helper.make_node("Neg", ["r"], ["e"], name="else_neg")], "else", [], [value("e", TensorProto.FLOAT, None)]
    )
    nodes = [
        helper.make_node("Relu", ["x"], ["r"], name="relu"),
        helper.make_node("Shape", ["r"], ["s"], name="shape"),
        helper.make_node("Gather", ["s", "first"], ["n"], name="gather", axis=0),
        helper.make_node("Cast", ["n"], ["n64"], name="cast", to=TensorProto.INT64),
        helper.make_node("Concat", ["n64", "n64"], ["dims"], name="concat", axis=0),
        helper.make_node("Greater", ["n64", "zero"], ["cond"], name="greater"),
        helper.make_node("If", ["cond"], ["picked"], name="if", then_branch=then, else_branch=other),
        helper.make_node("Reshape", ["picked", "dims_x"], ["y"], name="reshape"),
    ]
    init = [
        numpy_helper.from_array(np.array(0, np.int64), "zero"),
        numpy_helper.from_array(np.array([0], np.int64), "first"),
        numpy_helper.from_array(np.array([-1, 8], np.int64), "dims_x"),
    ]
    graph = helper.make_graph(
        nodes, "g", [value("x", TensorProto.FLOAT, ["N", 8])], [value("y", TensorProto.FLOAT, ["N", 8]),
        value("dims", TensorProto.INT64, [2])], init,
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    g = load_graph(model)
    facts = probe_tensors(model, [{"inputs": [{"input": "x", "min": [1, 8], "opt": [2, 8], "max": [4, 8]}]}])
    ends = [g.nodes[i].name for i in span_ends(g, _compute_indices(g), facts)]
    assert ends == ["relu", "if", "reshape"], ends
