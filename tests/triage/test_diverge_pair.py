"""Issue 30 item 7: `trtls reduce --diverge` between any two models with the same inputs, and a `--fix` that widens
the exclusion upstream when excluding the first diverging node alone makes the outputs worse; the editor's quick fix
only for an exclusion measured to pass.

The pair: the divergence tests' made-up model and the same model with one changed initializer (LayerNormalization's
gamma), run by the real CLI through ONNX Runtime with every tensor marked — no ModelOpt, no onnx_graphsurgeon (the
`gates` install). The widening: a real ModelOpt AutoCast fp16 conversion of `d = x·W_b − x·W_a` where W_b differs from
W_a by ~1e-3: fp16 weights lose the difference, so the Sub is the first tensor out of tolerance, yet keeping the Sub
in fp32 makes the output's error worse (it still reads the two fp16 MatMuls); keeping the MatMuls too passes."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from tests.triage.diverge_model import RECIPE
from tests.triage.diverge_model import write_model as _model
from tests.triage.test_reduce_cases import WITHOUT
from trtls.core.triage_records import DivergenceResult
from trtls.triage.findings import divergence_finding, measured_exclusion

needs_modelopt = pytest.mark.skipif(
    not os.environ.get("TRTLS_REQUIRE_PRECISION") and importlib.util.find_spec("modelopt") is None,
    reason="the precision extra (nvidia-modelopt) is not installed",
)


def _run(ws: Path, *args: str, without: str | None = None) -> tuple[int, dict | None, str]:
    argv = ["reduce", str(ws), "--json", *args]
    cmd = [sys.executable, "-c", WITHOUT, without, *argv] if without else [sys.executable, "-m", "trtls", *argv]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=ws)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    return proc.returncode, json.loads(lines[-1]) if lines else None, proc.stderr


def _pair(ws: Path) -> Path:
    """The recipe's model and a copy whose LayerNormalization gamma differs in one element."""
    (ws / "models").mkdir()
    _model(ws / "models" / "enc.onnx")
    (ws / "trtls.toml").write_text(RECIPE)
    model = onnx.load(str(ws / "models" / "enc.onnx"))
    (gamma,) = [i for i in model.graph.initializer if i.name == "gamma"]
    changed = numpy_helper.to_array(gamma).copy()
    changed[5] = 3.0
    gamma.CopyFrom(numpy_helper.from_array(changed, "gamma"))
    onnx.save(model, str(ws / "candidate.onnx"))
    np.savez(ws / "inputs.npz", x=np.random.default_rng(3).standard_normal((4, 64)).astype(np.float32))
    return ws / "candidate.onnx"


def test_two_models_with_the_same_inputs_diverge_first_at_the_changed_layer(tmp_path: Path) -> None:
    candidate = _pair(tmp_path)
    reference = tmp_path / "models" / "enc.onnx"
    args = ["--diverge", "--reference", str(reference), "--candidate", str(candidate), "--inputs", "inputs.npz"]
    code, record, stderr = _run(tmp_path, *args, without="onnx_graphsurgeon")
    assert record is not None, stderr[-2000:]
    assert code == 0 and record["mode"] == "models" and record["candidate"] == str(candidate), record
    first = record["firstDiverging"]
    assert (first["node"], first["tensor"], first["op"]) == ("norm", "n", "LayerNormalization")
    tensors = record["rounds"][0]["tensors"]
    assert [t["tensor"] for t in tensors] == ["h0", "a0", "h", "n", "y"], "every tensor marked, in graph order"
    assert all(t["withinTolerance"] and t["maxAbsError"] == 0.0 for t in tensors[:3]), "identical before the change"
    assert record["proposal"] is None and record["precision"] is None
    assert json.loads((Path(record["folder"]) / "divergence.json").read_text())["firstDiverging"] == first

    # the engine's ONNX as the reference, seeded inputs at its profile's opt shapes; the human lines say the node
    proc = subprocess.run(
        [sys.executable, "-m", "trtls", "reduce", str(tmp_path), "--engine", "enc", "--diverge", "--candidate",
         str(candidate)], capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "first tensor out of tolerance: n from node norm (LayerNormalization)" in proc.stdout, proc.stdout
    assert "proposal" not in proc.stdout


def test_the_page_of_two_models_names_them_and_no_conversion(tmp_path: Path) -> None:
    """`trtls report --reduction latest` on a `--candidate` search: the two models (absolute paths, as recorded, for a
    reader anywhere) and the tensors compared — not a conversion's `fixed` / `exclude_nodes` / rounds."""
    _pair(tmp_path)
    code, record, stderr = _run(tmp_path, "--engine", "enc", "--diverge", "--candidate", "candidate.onnx")
    assert record is not None and code == 0, stderr[-2000:]
    assert record["candidate"] == str(tmp_path / "candidate.onnx"), "recorded whole, not as typed in the cwd"
    page = subprocess.run(
        [sys.executable, "-m", "trtls", "report", "--reduction", "latest", "--recipe", str(tmp_path), "-o", "-"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert "Divergence · enc · two models" in page and str(tmp_path / "candidate.onnx") in page
    assert str(tmp_path / "models" / "enc.onnx") in page and "tensors compared" in page
    assert "exclude_nodes" not in page and "Round 0" not in page


def test_two_models_that_take_other_inputs_or_a_fix_are_usage_errors(tmp_path: Path) -> None:
    candidate = _pair(tmp_path)
    other = onnx.load(str(candidate))
    other.graph.input[0].name = "tokens"
    other.graph.node[0].input[0] = "tokens"
    onnx.save(other, str(tmp_path / "other.onnx"))
    said = _refused(tmp_path, "--engine", "enc", "--diverge", "--candidate", str(tmp_path / "other.onnx"))
    assert said.startswith("the two models take different inputs") and "tokens (float32)" in said, said
    said = _refused(tmp_path, "--engine", "enc", "--diverge", "--candidate", str(candidate), "--fix")
    assert "--fix, --route and --tensorrt need a conversion" in said, said
    # (no --engine and no --reference: the recipe's only engine's model is the reference,
    # tests/triage/test_reduce_engine_choice.py; several engines: TRT107 names them)
    said = _refused(tmp_path, "--diverge", "--reference", str(candidate), "--candidate", "missing.onnx")
    assert "the candidate model missing.onnx is not a file" in said, said


def test_two_models_that_share_no_tensor_name_are_not_said_to_agree(tmp_path: Path) -> None:
    """Every tensor of the candidate renamed, its output too (an exporter's own names): nothing can be compared, so
    never "no tensor leaves tolerance" (exit 1) — a usage error naming both models' outputs."""
    candidate = _pair(tmp_path)
    renamed = onnx.load(str(candidate))
    names = {o: f"{o}_r" for n in renamed.graph.node for o in n.output}
    for node in renamed.graph.node:
        node.input[:] = [names.get(i, i) for i in node.input]
        node.output[:] = [names[o] for o in node.output]
    renamed.graph.output[0].name = "y_r"
    onnx.save(renamed, str(tmp_path / "renamed.onnx"))
    said = _refused(tmp_path, "--engine", "enc", "--diverge", "--candidate", str(tmp_path / "renamed.onnx"))
    assert said.startswith("the two models share no floating-point tensor of the same name and shape"), said
    assert "returns y," in said and "returns y_r;" in said, said


def test_an_inputs_file_that_does_not_fit_is_said_before_any_run(tmp_path: Path) -> None:
    """`--inputs` that names another input, has other dims or dtype, is not an .npz, or is missing: a usage error that
    says which and what the model takes (TRT104, exit 2) — not ONNX Runtime's words as the search's failure (TRT983),
    NumPy's advice to unpickle the file, or a path with its closing quote cut off. The same for a conversion search."""
    candidate = _pair(tmp_path)
    np.savez(tmp_path / "other.npz", y=np.zeros((4, 64), np.float32))
    np.savez(tmp_path / "narrow.npz", x=np.zeros((4, 32), np.float32))
    np.savez(tmp_path / "ints.npz", x=np.zeros((4, 64), np.int64))
    (tmp_path / "junk.npz").write_bytes(b"not an archive")
    pair = ("--engine", "enc", "--diverge", "--candidate", str(candidate), "--inputs")
    takes = "does not fit the model (x (float32, ['batch', 64])): "
    said = _refused(tmp_path, *pair, str(tmp_path / "other.npz"))
    assert takes + "no array for input x; an array 'y' the model does not take" in said, said
    said = _refused(tmp_path, *pair, str(tmp_path / "narrow.npz"))
    assert takes + "x has shape [4, 32], the model takes ['batch', 64]" in said, said
    said = _refused(tmp_path, *pair, str(tmp_path / "ints.npz"))
    assert takes + "x is int64, the model takes float32" in said, said
    said = _refused(tmp_path, *pair, str(tmp_path / "junk.npz"))
    assert said.endswith("junk.npz is not a NumPy .npz of arrays by input name (np.savez(path, name=array, …)): it is "
                         "not an .npz archive") and "pickle" not in said, said  # fmt: skip
    said = _refused(tmp_path, *pair, "missing.npz")
    assert said == "the inputs file missing.npz is not a file", said
    said = _refused(tmp_path, "--engine", "enc", "--diverge", "--inputs", str(tmp_path / "narrow.npz"))
    assert takes + "x has shape [4, 32]" in said, said


def _refused(ws: Path, *args: str) -> str:
    """A usage error: exit 2, a TRT104 located on the recipe (with --json, the error as JSON), no evidence."""
    code, record, stderr = _run(ws, *args)
    assert code == 2 and record is not None, stderr[-2000:]
    assert record["type"] == "error" and record["code"] == "TRT104", record
    assert record["file"] == str(ws / "trtls.toml") and not (ws / ".trtls" / "reduce").exists(), record
    return record["message"]


RECIPE_WIDEN = RECIPE.replace("models/enc.onnx", "models/diff.onnx")


def write_difference_model(path: Path) -> None:
    """`d = x·W_b − x·W_a`, `y = d·W2`: W_b is W_a plus ~1e-3, a difference fp16 weights cannot hold."""
    rng = np.random.default_rng(0)
    w = rng.standard_normal((64, 64)).astype(np.float32)
    init = [
        numpy_helper.from_array(w, "W_a"),
        numpy_helper.from_array(w + (rng.standard_normal((64, 64)) * 1e-3).astype(np.float32), "W_b"),
        numpy_helper.from_array((rng.standard_normal((64, 16)) * 0.2).astype(np.float32), "W2"),
    ]
    nodes = [
        helper.make_node("MatMul", ["x", "W_a"], ["u"], name="proj_a"),
        helper.make_node("MatMul", ["x", "W_b"], ["v"], name="proj_b"),
        helper.make_node("Sub", ["v", "u"], ["d"], name="difference"),
        helper.make_node("MatMul", ["d", "W2"], ["y"], name="head"),
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


@needs_modelopt
def test_a_fix_that_makes_the_error_worse_is_widened_upstream_and_only_a_measured_pass_is_offered(
    tmp_path: Path,
) -> None:
    (tmp_path / "models").mkdir()
    write_difference_model(tmp_path / "models" / "diff.onnx")
    (tmp_path / "trtls.toml").write_text(RECIPE_WIDEN)
    x = np.random.default_rng(1).standard_normal((4, 64)).astype(np.float32)
    np.savez(tmp_path / "inputs.npz", x=x)
    code, record, stderr = _run(tmp_path, "--engine", "enc", "--diverge", "--fix", "--inputs", "inputs.npz")
    assert record is not None, stderr[-2000:]
    first = record["firstDiverging"]
    assert first["node"] == "difference" and first["op"] == "Sub", first
    rounds = record["rounds"]
    assert [r["excludeNodes"] for r in rounds] == [[], ["difference"], ["difference", "proj_a", "proj_b"]]
    assert rounds[1]["reason"] == "first_diverging" and not rounds[1]["outputsPass"]
    assert rounds[1]["outputRangeError"] >= rounds[0]["outputRangeError"], "excluding the Sub alone did not help"
    assert rounds[2]["reason"] == "widened_upstream" and rounds[2]["outputsPass"]
    assert code == 0 and record["fixed"] is True and record["widened"] == ["proj_a", "proj_b"]
    result = DivergenceResult.model_validate(record)  # what the app layer's run hands the faces
    assert measured_exclusion(result) == ["difference", "proj_a", "proj_b"]
    finding = divergence_finding(result)
    assert "widened upstream to ['proj_a', 'proj_b']" in finding.message, finding.message

    # independently of the tool: the conversion it settled on, run here, against the fp32 model
    ref = ort.InferenceSession(str(tmp_path / "models" / "diff.onnx")).run(None, {"x": x})[0]
    for r, within in ((rounds[1], False), (rounds[2], True)):
        got = ort.InferenceSession(r["convertedModel"]).run(None, {"x": x})[0].astype(np.float32)
        assert bool(np.max(np.abs(got - ref)) / np.max(np.abs(ref)) <= record["rangeRtol"]) is within

    # what the editor is given: no quick fix for the round that got worse, nor for a proposal never measured
    unmeasured = DivergenceResult.model_validate(
        {**record, "fixAsked": False, "fixed": None, "excludeNodes": ["difference"]}
    )
    worse = DivergenceResult.model_validate({**record, "fixed": False, "excludeNodes": ["difference"]})
    assert measured_exclusion(unmeasured) is None and measured_exclusion(worse) is None
    assert "was not measured" in divergence_finding(unmeasured).message
    assert "none is offered" in divergence_finding(worse).message


def _nan_pair(ws: Path, changed: float) -> tuple[Path, Path]:
    """A model whose reference itself makes NaN — `l = Log(-|x| - 1)` (every element) and `s = Sqrt(x)` (the negative
    ones) — and a copy whose `y = s · w` has `w` scaled by `changed`."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])
    outputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [4, 8]) for n in ("l", "y")]
    nodes = [
        helper.make_node("Abs", ["x"], ["a"], name="abs"),
        helper.make_node("Neg", ["a"], ["n"], name="neg"),
        helper.make_node("Sub", ["n", "one"], ["m"], name="sub"),
        helper.make_node("Log", ["m"], ["l"], name="log"),
        helper.make_node("Sqrt", ["x"], ["s"], name="sqrt"),
        helper.make_node("Mul", ["s", "w"], ["y"], name="scale"),
    ]
    paths = []
    for name, factor in (("reference.onnx", 1.0), ("candidate.onnx", changed)):
        inits = [
            numpy_helper.from_array(np.ones((4, 8), np.float32), "one"),
            numpy_helper.from_array(np.full((4, 8), 2.0 * factor, np.float32), "w"),
        ]
        graph = helper.make_graph(nodes, "nan", [x], outputs, inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        model.ir_version = 9
        onnx.save(model, str(ws / name))
        paths.append(ws / name)
    np.savez(ws / "inputs.npz", x=np.random.default_rng(5).standard_normal((4, 8)).astype(np.float32))
    return paths[0], paths[1]


def test_a_tensor_whose_reference_is_all_nan_is_not_checked_never_within(tmp_path: Path) -> None:
    """A NaN the reference model makes itself is no number to match: the elements are counted as not compared, and a
    tensor with no finite reference element is not_checked (withinTolerance null), never "within tolerance" (before,
    its error over no element was 0 and it was said to pass). Real ONNX Runtime runs of both models."""
    (tmp_path / "trtls.toml").write_text(RECIPE)
    (tmp_path / "models").mkdir()
    _model(tmp_path / "models" / "enc.onnx")
    reference, candidate = _nan_pair(tmp_path, changed=1.5)
    args = ["--diverge", "--reference", str(reference), "--candidate", str(candidate), "--inputs", "inputs.npz"]
    code, record, stderr = _run(tmp_path, *args, without="onnx_graphsurgeon")
    assert record is not None, stderr[-2000:]
    by_name = {t["tensor"]: t for t in record["rounds"][0]["tensors"]}
    assert by_name["l"]["withinTolerance"] is None and by_name["l"]["notCompared"] == 32, by_name["l"]
    x = np.load(tmp_path / "inputs.npz")["x"]
    negative = int(np.count_nonzero(x < 0))
    assert 0 < negative < 32 and by_name["s"]["notCompared"] == negative and by_name["s"]["withinTolerance"] is True
    assert by_name["m"]["notCompared"] == 0 and by_name["m"]["withinTolerance"] is True
    assert record["rounds"][0]["outputsNotChecked"] == ["l"]
    first = record["firstDiverging"]
    assert (first["tensor"], first["notCompared"]) == ("y", negative) and code == 0, record
    assert [t["tensor"] for t in record["rounds"][0]["next"]] == [], "a not_checked tensor is not a diverging one"

    # the same model on both sides: nothing diverges, and the human lines say what was not checked
    proc = subprocess.run(
        [sys.executable, "-m", "trtls", "reduce", str(tmp_path), "--diverge", "--reference", str(reference),
         "--candidate", str(reference), "--inputs", "inputs.npz"], capture_output=True, text=True, timeout=600,
        cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr[-2000:]
    assert "no tensor leaves tolerance" in proc.stdout
    assert "not_checked (1): the reference holds only inf/NaN in l" in proc.stdout, proc.stdout


def test_an_output_the_candidate_makes_in_another_shape_is_not_checked_never_passed(tmp_path: Path) -> None:
    """The candidate's output `y` made `[4, 1, 64]` (an Unsqueeze after the same graph): every other tensor agrees, and
    the record said `outputsPass: true` with `outputsNotChecked: []` — a pass over an output nothing measured. The
    output is not_checked now, in the record and in the human lines. Real ONNX Runtime runs of both models."""
    _pair(tmp_path)
    model = onnx.load(str(tmp_path / "models" / "enc.onnx"))
    g = model.graph
    (maker,) = [n for n in g.node if "y" in n.output]
    maker.output[list(maker.output).index("y")] = "y_pre"
    g.node.append(helper.make_node("Unsqueeze", ["y_pre", "axis1"], ["y"], name="unsq"))
    g.initializer.append(numpy_helper.from_array(np.array([1], np.int64), "axis1"))
    del g.output[:]
    g.output.append(helper.make_tensor_value_info("y", TensorProto.FLOAT, None))
    onnx.save(model, str(tmp_path / "reshaped.onnx"))
    args = ["--diverge", "--candidate", str(tmp_path / "reshaped.onnx"), "--inputs", "inputs.npz"]
    code, record, stderr = _run(tmp_path, "--engine", "enc", *args, without="onnx_graphsurgeon")
    assert record is not None, stderr[-2000:]
    assert record["firstDiverging"] is None and "y" in record["notComparedNames"], record
    assert record["rounds"][0]["outputsNotChecked"] == ["y"], record["rounds"][0]
    proc = subprocess.run(
        [sys.executable, "-m", "trtls", "reduce", str(tmp_path), "--engine", "enc", *args],
        capture_output=True, text=True, timeout=600, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr[-2000:]
    assert "not_checked (1): the output y could not be compared" in proc.stdout, proc.stdout


@pytest.mark.parametrize("rtol", ["nan", "-1", "inf"])
def test_a_tolerance_that_is_not_a_finite_number_of_0_or_more_is_refused(tmp_path: Path, rtol: str) -> None:
    """`--rtol -1` (or nan) made every tensor "leave tolerance" — the model against itself diverged at its first node
    (`range error 0 > -1`) and the search exited 0, a cause found; `--rtol inf` let any error pass. Each is bad input
    now (TRT104, exit 2), before anything runs."""
    _pair(tmp_path)
    model = str(tmp_path / "models" / "enc.onnx")
    proc = subprocess.run(
        [sys.executable, "-m", "trtls", "reduce", str(tmp_path), "--engine", "enc", "--diverge", "--candidate", model,
         "--inputs", "inputs.npz", "--rtol", rtol], capture_output=True, text=True, timeout=600, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stdout + proc.stderr[-2000:]
    assert "TRT104 --rtol must be a finite number of 0 or more" in proc.stderr, proc.stderr
    assert not (tmp_path / ".trtls" / "reduce").exists()
