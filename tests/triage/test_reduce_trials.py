"""Issue 30's "Done means" on trials, and item 8's candidate that made a model input of a constant: a failure that
names its node (a parser rejection) is tried on that node alone first; a recipe that changes no setting spends no
trial on the first node alone; a `Constant` made before a cut comes along into the candidate."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper

from tests.triage.test_reduce_cases import _chain, _engine, _reduce
from trtls.triage.probe import probe_tensors
from trtls.triage.subgraph import cut, load_graph


def test_a_failure_that_names_its_node_is_tried_on_that_node_first(tmp_path: Path) -> None:
    """A 24-node chain whose 17th node, a Det, TensorRT-RTX's parser rejects: the rejection names `det`, the node
    alone fails the same way, and the reduction ends in 2 trials (Polygraphy's bisect spends 10 checks on it:
    docs/performance.md)."""
    ops = [("Relu", f"r{i}") if i % 2 else ("Sigmoid", f"s{i}") for i in range(16)]
    ops += [("Det", "det")] + [("Neg", f"n{i}") if i % 2 else ("Abs", f"a{i}") for i in range(7)]
    _chain(tmp_path / "m.onnx", ops, ["N", 4, 4], ["N"])
    (tmp_path / "trtls.toml").write_text(_engine("m", "m.onnx", "[N, 4, 4]", smem=False))
    code, record, stderr = _reduce(tmp_path, "m")
    assert record is not None, stderr[-2000:]
    assert code == 0 and record["outcome"] == "reduced" and record["minimal"]["nodeNames"] == ["det"]
    assert [t["step"] for t in record["trials"]] == ["confirm", "named_node"], record["trials"]
    assert record["trialsBuilt"] == 2


def test_a_constant_made_before_the_cut_comes_along_and_is_no_model_input() -> None:
    """`bias` is a float Constant node made first; a cut that starts at the Add reading it keeps it as a node, so
    the candidate's only input is what the Add reads from the cut-off Relu."""
    bias = onnx.numpy_helper.from_array(np.linspace(0, 1, 16).astype(np.float32), "bias_value")
    nodes = [
        helper.make_node("Constant", [], ["bias"], name="bias_const", value=bias),
        helper.make_node("Relu", ["x"], ["r"], name="relu"),
        helper.make_node("Add", ["r", "bias"], ["y"], name="add"),
    ]
    value = helper.make_tensor_value_info
    graph = helper.make_graph(
        nodes, "g", [value("x", TensorProto.FLOAT, ["N", 16])], [value("y", TensorProto.FLOAT, ["N", 16])]
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    g = load_graph(model)
    profiles = [{"inputs": [{"input": "x", "min": [1, 16], "opt": [2, 16], "max": [4, 16]}]}]
    facts = probe_tensors(model, profiles)
    add = [n.name for n in g.nodes].index("add")
    candidate = cut(g, add, add, facts, len(profiles))
    assert [i.name for i in candidate.model.graph.input] == ["r"]
    assert [n.name for n in candidate.model.graph.node] == ["bias_const", "add"]
    assert candidate.compute_nodes == 1 and candidate.node_names == ["add"]
    onnx.checker.check_model(candidate.model)


def test_the_editors_reduce_takes_the_commands_bounds_patterns_and_resume() -> None:
    """Item 8 for the editor: `trtls.reduceEngine`'s maxTrials is 1 to 10,000 like `--max-trials` (10^12 was taken),
    a failRegex that is no regular expression is refused by trtls.app.triage (TRT102, as `--fail-regex` and the
    recipe's fail_regex), and resume/failRegex are accepted."""
    import pytest
    from pygls.exceptions import JsonRpcInvalidParams

    from trtls.app.triage import bad_pattern
    from trtls.lsp.command_args import ReduceEngineArgs, parse_args

    base = {"uri": "file:///r/trtls.toml", "engine": "demo"}
    for budget in (0, 10**12):
        with pytest.raises(JsonRpcInvalidParams, match="maxTrials"):
            parse_args(ReduceEngineArgs, {**base, "maxTrials": budget})
    refused = bad_pattern(parse_args(ReduceEngineArgs, {**base, "failRegex": ["(unclosed"]}).failRegex)
    assert refused is not None and refused.lines[0].startswith("TRT102 not a regular expression: '(unclosed'")
    args = parse_args(ReduceEngineArgs, {**base, "maxTrials": 10_000, "failRegex": [r"K exceeds"], "resume": True})
    assert (args.maxTrials, args.failRegex, args.resume) == (10_000, [r"K exceeds"], True)


def test_a_profile_the_model_cannot_take_is_said_as_the_cause_not_tensorrt(tmp_path: Path) -> None:
    """Item 8's headline: the real PP-OCRv4 detector (rapidocr-onnxruntime) with a 100×100 opt profile fails to
    build, and ONNX Runtime cannot run the model at those shapes either (its Adds broadcast 7 by 8): the record says
    the profile is the likely cause, not TensorRT, instead of an internal error of the reduction."""
    _ppocr_at_100(tmp_path)
    code, record, stderr = _reduce(tmp_path, "det")
    assert record is not None, stderr[-2000:]
    assert code == 1 and record["outcome"] == "failed" and record["errorCode"] == "TRT983", record
    said = "the model itself does not run at profile 0's opt shapes {'x': [1, 3, 100, 100]} in ONNX Runtime either"
    assert record["error"].startswith(said) and "not TensorRT" in record["error"], record["error"]
    assert record["causeText"] == record["error"] and "the reduction failed" not in record["error"]


def test_the_builds_advice_for_a_profile_the_model_cannot_take_names_the_profile_not_nvidia(tmp_path: Path) -> None:
    """Item 8 for `trtls build`: the same real build fails with TensorRT's `Error Code 4: Internal Error (kOPT values
    for profile 0 violate shape constraints: p2o.Add.248 …)`; its retry advice (core.evidence.retry_advice, in
    summary.json and on the CLI's retry line) says the profile is the likely cause and names `trtls reduce`, never
    "report it to NVIDIA"."""
    import json
    import subprocess
    import sys

    _ppocr_at_100(tmp_path)
    proc = subprocess.run(
        [sys.executable, "-m", "trtls", "build", str(tmp_path)], capture_output=True, text=True, timeout=900
    )
    (summary_file,) = (tmp_path / ".trtls" / "runs").glob("det-*/summary.json")
    summary = json.loads(summary_file.read_text())
    assert summary["outcome"] == "failed" and summary["failure"]["kind"] == "internal_error", proc.stdout[-2000:]
    rule = summary["retryRule"]
    assert "profile 0's opt shapes" in rule and "not TensorRT" in rule and "`trtls reduce --engine det`" in rule
    assert "NVIDIA" not in rule, rule
    (line,) = [ln for ln in proc.stdout.splitlines() if ln.strip().startswith("retry:")]
    assert line.strip() == f"retry: investigate — {rule}"


def _ppocr_at_100(ws: Path) -> None:
    """The real PP-OCRv4 detector (rapidocr-onnxruntime) with a 100×100 opt point its Adds cannot broadcast."""
    import shutil

    from tests.onnx_files.third_party import fetch_all

    shutil.copyfile(fetch_all()["ppocr_det"], ws / "m.onnx")
    (ws / "trtls.toml").write_text(
        '[engines.det]\nonnx = "m.onnx"\noutput = "build/det.engine"\n\n[[engines.det.profiles]]\n'
        "inputs.x = { min = [1, 3, 32, 32], opt = [1, 3, 100, 100], max = [1, 3, 1280, 1280] }\n"
    )


def test_the_largest_passing_model_near_the_failing_one_is_kept_as_min_good(tmp_path: Path) -> None:
    """Polygraphy's --min-good: the two-output model whose LayerNormalization 32 KiB of shared memory breaks keeps,
    beside minimal.onnx, a candidate that built — the one nearest the minimal model — without the LayerNorm."""
    from tests.triage.test_reduce_cases import _two_outputs

    _two_outputs(tmp_path / "m.onnx")
    (tmp_path / "trtls.toml").write_text(_engine("m", "m.onnx", "[N, 16, 64]", smem=True))
    code, record, stderr = _reduce(tmp_path, "m")
    assert record is not None and code == 0, stderr[-2000:]
    assert record["minimal"]["nodeNames"] == ["ln"]
    good = record["minGood"]
    assert good is not None, record["trials"]
    (trial,) = [t for t in record["trials"] if t["trial"] == good["trial"]]
    assert trial["outcome"] == "built" and not trial["stillFails"]
    kept = onnx.load(str(tmp_path / ".trtls" / "reduce" / record["id"] / "min_good.onnx"))
    assert len(kept.graph.node) == good["nodes"] and "ln" not in [n.name for n in kept.graph.node]
    cuts = [t for t in record["trials"] if t["step"] not in ("confirm", "settings")]
    others = [t["nodes"] for t in cuts if t["outcome"] == "built"]
    assert all(abs(n - record["minimal"]["nodes"]) >= abs(good["nodes"] - record["minimal"]["nodes"]) for n in others)


def test_a_fail_regex_failure_that_names_its_layer_is_tried_on_it_first(tmp_path: Path) -> None:
    """The TopK chain's unclassified failure (`ITopKLayer topk: topk: K exceeds …`), reduced with --fail-regex:
    the layer it names is tried alone first — 2 trials (Polygraphy's bisect: 9 checks on the benchmark's chain)."""
    ops = [("Relu", "relu"), ("Sigmoid", "sig"), ("TopK", "topk"), ("Neg", "neg")]
    _chain(tmp_path / "m.onnx", ops, ["N", 8192], ["N", 5000])
    (tmp_path / "trtls.toml").write_text(_engine("m", "m.onnx", "[N, 8192]", smem=False))
    code, record, stderr = _reduce(tmp_path, "m", "--fail-regex", r"K exceeds the maximum value allowed \(3840\)")
    assert record is not None and code == 0, stderr[-2000:]
    assert record["failure"]["layer"] == "topk" and record["minimal"]["nodeNames"] == ["topk"]
    assert [t["step"] for t in record["trials"]] == ["confirm", "named_node"]


def test_a_shape_computation_that_varies_with_the_profile_comes_along_into_the_cut(tmp_path: Path) -> None:
    """magika's real model (a jax2tf export) computes its reshapes' shapes from the batch size (Shape, Slice,
    Concat): a cut that made such a tensor an input failed otherwise (`Optimization profile 0 is missing values for
    shape input tensor …`), so the inputs bisection lost its way and stopped at 23 nodes. The shape computation
    comes along now: every candidate builds or fails the same way, and the LayerNorm the 32 KiB of shared memory
    breaks is found in 2 nodes."""
    import shutil

    from tests.onnx_files.third_party import fetch_all

    shutil.copyfile(fetch_all()["magika"], tmp_path / "m.onnx")
    (tmp_path / "trtls.toml").write_text(
        '[engines.m]\nonnx = "m.onnx"\noutput = "build/m.engine"\n[engines.m.builder]\n'
        "memory_pool_limits = { tactic_shared_memory_kib = 32 }\n[[engines.m.profiles]]\n"
        "inputs.bytes = { min = [1, 2048], opt = [1, 2048], max = [8, 2048] }\n"
    )
    code, record, stderr = _reduce(tmp_path, "m")
    assert record is not None and code == 0, stderr[-2000:]
    assert record["outcome"] == "configuration" and record["causeSettings"] == {"tactic_shared_memory_kib": 32}
    other = [t for t in record["trials"] if t["outcome"] == "failed" and not t["stillFails"]]
    assert other == [], "a candidate that fails otherwise (a shape input without values) is a lost bisection step"
    assert record["minimal"]["nodes"] <= 3, record["minimal"]["nodeNames"]
