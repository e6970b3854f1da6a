"""Gate 4 parity on real runtimes: pass path, perturbed runtime rejected with the statistic named,
hanging runtime cut by its timeout, concurrency, TensorRT unavailable → hold (never pass), tokenizer."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from trtls.core.gate_result import decide
from trtls.gates import parity as P

ROUTE = ("routes", "tiny")
PATHS = {"route": ROUTE, "tolerances": ROUTE + ("tolerances",)}


def tiny_model(path: Path) -> Path:
    w = (np.arange(16, dtype=np.float32).reshape(4, 4) / 16).ravel().tolist()
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["x", "w"], ["m"]),
            helper.make_node("Tanh", ["m"], ["y"]),
            helper.make_node("Relu", ["m"], ["r"]),
        ],
        "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
        [
            helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4]),
            helper.make_tensor_value_info("r", TensorProto.FLOAT, ["batch", 4]),
        ],
        [helper.make_tensor("w", TensorProto.FLOAT, [4, 4], w)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


def inputs() -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(7)
    return [{"x": rng.standard_normal((3, 4)).astype(np.float32)} for _ in range(2)]


@pytest.fixture
def model(tmp_path: Path) -> Path:
    return tiny_model(tmp_path / "tiny.onnx")


def by_name(checks):
    return {c.name: c for c in checks}


def test_pass_path_onnxruntime_against_onnx_reference(model):
    ref = P.runtime_spec("onnx.reference", model)
    ut = P.runtime_spec("onnxruntime", model, max_input_bytes=4096)
    checks = P.check_parity(ref, ut, inputs(), paths=PATHS)
    assert decide(checks) == "supported", [(c.name, c.status, c.message) for c in checks if c.status != "pass"]
    got = by_name(checks)
    assert {
        "parity.runtime_available",
        "parity.run",
        "parity.signature",
        "parity.finite",
        "parity.tolerance:y",
        "parity.tolerance:r",
        "parity.malformed",
        "parity.concurrency",
    } <= set(got)
    stats = got["parity.tolerance:y"].evidence["stats"]
    assert {
        "max_abs",
        "mean_abs",
        "median_abs",
        "p95_abs",
        "p99_abs",
        "max_rel",
        "mean_rel",
        "median_rel",
        "p95_rel",
        "p99_rel",
    } <= set(stats)
    assert stats["max_abs"] < 1e-5 and stats["elements"] == 24
    assert got["parity.tolerance:y"].path == ROUTE + ("tolerances",)
    assert got["parity.runtime_available"].path == ROUTE + ("runtime",)
    # malformed inputs reach onnxruntime unfiltered: it refuses a wrong shape or type itself (its own message, not
    # trtls's validation), and answers NaN / empty / large batches (what it does is the result)
    cases = got["parity.malformed"].evidence["cases"]
    assert got["parity.malformed"].evidence["trtls_input_validation"] == "off"
    assert {c: o["outcome"] for c, o in cases.items()} == {
        "wrong_shape": "clean",
        "wrong_dtype": "clean",
        "nan": "answered",
        "empty": "answered",
        "oversized": "answered",
    }
    assert "malformed input refused" not in cases["wrong_shape"]["detail"]  # trtls's own refusal never answers
    assert (
        "onnxruntime" in cases["wrong_dtype"]["detail"].lower() or "INVALID_ARGUMENT" in cases["wrong_dtype"]["detail"]
    )


@pytest.mark.parametrize(
    "stat, words",
    [
        ("mean", "mean abs error"),
        ("max", "max abs error"),
        ("median", "median abs error"),
        ("quantile", "quantile(0.9) abs error"),
        ("elemwise", "elemwise check failed"),
    ],
)
def test_perturbed_runtime_fails_with_the_statistic_named(model, stat, words):
    ref = P.runtime_spec("onnx.reference", model)
    ut = P.runtime_spec("onnxruntime", model, perturb=1e-3)
    tol = {"atol": 1e-5, "rtol": 1e-5, "check_error_stat": stat}
    if stat == "quantile":
        tol["quantile"] = 0.9
    checks = P.check_parity(ref, ut, inputs(), tolerances={"*": tol}, malformed=False, concurrency=0, paths=PATHS)
    got = by_name(checks)
    assert decide(checks) == "reject"
    y = got["parity.tolerance:y"]
    assert y.status == "reject" and y.code == "TRT805"
    assert words in y.message and "'y'" in y.message
    assert y.path == ROUTE + ("tolerances", "*")
    assert y.evidence["check_error_stat"] == stat
    assert got["parity.fault_injection"].status == "hold" and "FAULT INJECTION" in got["parity.fault_injection"].message


def test_loose_tolerance_passes_perturbed_outputs_but_fault_injection_still_holds(model):
    ref = P.runtime_spec("onnx.reference", model)
    ut = P.runtime_spec("onnxruntime", model, perturb=1e-3)
    checks = P.check_parity(
        ref,
        ut,
        inputs(),
        tolerances={"y": {"atol": 0.1}, "r": {"atol": 0.1}},
        malformed=False,
        concurrency=0,
        paths=PATHS,
    )
    got = by_name(checks)
    assert got["parity.tolerance:y"].status == "pass"
    assert got["parity.tolerance:y"].path == ROUTE + ("tolerances", "y")
    assert decide(checks) == "hold"  # never supported with fault injection on


def test_per_output_tolerance_only_loosens_that_output(model):
    ref = P.runtime_spec("onnx.reference", model)
    ut = P.runtime_spec("onnxruntime", model, perturb=1e-3)
    checks = by_name(P.check_parity(ref, ut, inputs(), tolerances={"y": {"atol": 0.1}}, malformed=False, concurrency=0))
    assert checks["parity.tolerance:y"].status == "pass"
    assert checks["parity.tolerance:r"].status == "reject"


def test_a_hanging_runtime_on_malformed_inputs_is_cut_cleanly(tmp_path, model):
    # answers well-formed inputs correctly, hangs forever on anything it does not like
    runner = tmp_path / "runner.py"
    runner.write_text(
        "import sys, time, numpy as np\n"
        "x = np.load(sys.argv[1])['x']\n"
        "if x.dtype != np.float32 or x.ndim != 2 or x.shape[0] == 0 or x.shape[1] != 4 or x.nbytes > 4096 or not "
        "np.isfinite(x).all():\n"
        "    while True:\n"
        "        time.sleep(1)\n"
        "w = (np.arange(16, dtype=np.float32).reshape(4, 4) / 16).astype(np.float64)\n"
        "m = x.astype(np.float64) @ w\n"
        "np.savez(sys.argv[2], y=np.tanh(m).astype(np.float32), r=np.maximum(m, 0).astype(np.float32))\n"
    )
    ref = P.runtime_spec("onnx.reference", model)
    ut = P.runtime_spec("command", command=[sys.executable, str(runner)], timeout_s=3.0, max_input_bytes=4096)
    checks = by_name(P.check_parity(ref, ut, inputs(), tolerances={"*": {"atol": 1e-5}}, concurrency=2))
    assert checks["parity.tolerance:y"].status == "pass"
    mal = checks["parity.malformed"]
    assert mal.status == "reject" and mal.code == "TRT807"
    cases = mal.evidence["cases"]
    # oversized: the reference-size input answers, so a timeout there may be work on a huge batch: not called a hang
    assert {c: o["outcome"] for c, o in cases.items()} == {
        c: "undetermined" if c == "oversized" else "hang" for c in P.MALFORMED_CASES
    }
    assert "timed out after 3 s" in cases["nan"]["detail"]
    assert checks["parity.concurrency"].status == "pass"


def test_runtime_that_accepts_malformed_input_fails_the_check(tmp_path, model):
    runner = tmp_path / "lax.py"
    runner.write_text(
        "import sys, numpy as np\n"
        "x = np.load(sys.argv[1])['x']\n"
        "np.savez(sys.argv[2], y=np.zeros((3, 4), np.float32), r=np.zeros((3, 4), np.float32))\n"
    )
    ut = P.runtime_spec("command", command=[sys.executable, str(runner)], max_input_bytes=4096)
    check = P.check_malformed(ut, inputs()[0], ())
    assert check.status == "reject" and "accepted" in check.message


def test_concurrency_mismatch_is_rejected(model):
    # fault injection draws fresh noise per request: concurrent outputs cannot equal the serial one
    ut = P.runtime_spec("onnxruntime", model, perturb=1e-3)
    serial = {"y": np.zeros((3, 4), np.float32), "r": np.zeros((3, 4), np.float32)}
    check = P.check_concurrency(ut, inputs()[0], serial, 3, True, {}, ())
    assert check.status == "reject" and check.code == "TRT808" and "differ from serial" in check.message


def test_tensorrt_runtime_unavailable_here_holds_never_passes(tmp_path, model):
    engine = tmp_path / "tiny.engine"
    engine.write_bytes(b"\x00" * 64)
    ref = P.runtime_spec("onnx.reference", model)
    ut = P.runtime_spec("tensorrt", engine)
    checks = P.check_parity(ref, ut, inputs(), paths=PATHS)
    assert decide(checks) == "hold"
    assert not any(c.status == "pass" for c in checks)
    (only,) = [c for c in checks if c.name == "parity.runtime_available"]
    assert only.status == "hold" and only.code == "TRT801" and "unavailable" in only.message


def test_signature_and_nan_problems_are_rejected():
    ref = {"y": np.ones((2, 2), np.float32)}
    assert any("shape" in p for p in P.signature_problems({"y": np.ones((2, 3), np.float32)}, ref))
    assert any("dtype" in p for p in P.signature_problems({"y": np.ones((2, 2), np.float16)}, ref))
    assert any("missing" in p for p in P.signature_problems({}, ref))
    bad, _ = P.nonfinite_problems({"y": np.array([[1, np.nan], [np.inf, 1]], np.float32)}, ref)
    assert bad and "1 NaN, 1 Inf" in bad[0]


def test_error_statistics_match_hand_computation():
    ref = np.array([1.0, 2.0, 4.0, 0.0], np.float32)
    out = np.array([1.1, 2.0, 3.0, 0.0], np.float32)
    a, r, _ = P.error_arrays(out, ref)
    stats = P.error_stats(a, r)
    assert stats["max_abs"] == pytest.approx(1.0)
    assert stats["mean_abs"] == pytest.approx(0.275, rel=1e-6)
    assert stats["max_rel"] == pytest.approx(0.25)
    # polygraphy: a statistic fails only when both abs and rel exceed; max abs 1.0 > 0.5, max rel 0.25 <= 0.3 → pass
    assert P.compare_output("o", [out], [ref], P.Tolerance(atol=0.5, rtol=0.3, check_error_stat="max")).passed
    assert not P.compare_output("o", [out], [ref], P.Tolerance(atol=0.5, rtol=0.2, check_error_stat="max")).passed


def test_invalid_tolerance_config_holds_on_its_key(model):
    ref = P.runtime_spec("onnx.reference", model)
    ut = P.runtime_spec("onnxruntime", model)
    checks = P.check_parity(ref, ut, inputs(), tolerances={"y": {"check_error_stat": "p42"}}, paths=PATHS)
    assert decide(checks) == "hold"
    assert checks[0].code == "TRT810" and checks[0].path == ROUTE + ("tolerances", "y")


# ------------------------------------------------------------------------------------------- tokenizer


def make_tokenizer(path: Path, vocab: dict[str, int]) -> Path:
    import tokenizers  # the gates extra, installed with the tests: a missing one fails, not skips
    from tokenizers import models, pre_tokenizers

    tok = tokenizers.Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.save(str(path))
    return path


def test_tokenizer_parity_identical_and_different(tmp_path):
    vocab = {"[UNK]": 0, "hello": 1, "world": 2, "bundle": 3}
    ref = make_tokenizer(tmp_path / "ref.json", vocab)
    same = make_tokenizer(tmp_path / "bundle_copy.json", vocab)
    drift = make_tokenizer(tmp_path / "drift.json", {"[UNK]": 0, "hello": 1, "world": 3, "bundle": 2})
    texts = ["hello world", "bundle hello"]
    ok = P.check_tokenizer(P.TokenizerParity(ref, texts, under_test=same))
    assert ok.status == "pass" and ok.code == "TRT806"
    bad = P.check_tokenizer(P.TokenizerParity(ref, texts, under_test=drift), path=("routes", "t"))
    assert (
        bad.status == "reject"
        and "text 0" in bad.message
        and "position 1" in bad.message
        and bad.path == ("routes", "t")
    )
    ids = P.check_tokenizer(P.TokenizerParity(ref, texts, under_test_ids=[[1, 2], [3, 1]]))
    assert ids.status == "pass"
    assert P.check_tokenizer(P.TokenizerParity(ref, texts, under_test_ids=[[1, 2], [3, 0]])).status == "reject"


def test_a_nan_where_the_reference_has_a_number_is_counted_and_fails():
    """fp16 overflow gives NaN/Inf in the runtime's output: those elements have no finite distance, and the message
    said "0 of 24 elements outside" for a reject (seen in triage's route case). They are counted, and fail."""
    ref = np.arange(24, dtype=np.float32).reshape(2, 12)
    out = ref.copy()
    out[0, 3], out[1, 5] = np.nan, np.inf
    got = P.compare_output("o", [out], [ref], P.Tolerance(atol=1e-3, rtol=1e-3))
    assert not got.passed
    assert "2 of 24 elements outside" in got.message
    assert "2 of them NaN or Inf where the reference is not" in got.message
    assert got.stats["nonfinite_mismatches"] == 2
    same = ref.copy()
    same[0, 0] = ref[0, 0] = np.inf  # identical non-finite values are equal (infinities_compare_equal)
    assert P.compare_output("o", [same], [ref], P.Tolerance(atol=1e-3, rtol=1e-3)).passed


def test_an_output_with_no_element_to_compare_is_not_checked_never_a_pass():
    """Every element NaN on both sides alike, or an empty output: Polygraphy's comparator finds nothing outside the
    tolerance, and the check used to say `pass` over zero elements. Nothing was measured: not_checked, said so."""
    ref = np.full((2, 3), np.nan, np.float32)
    tol = P.Tolerance(atol=1e-3, rtol=1e-3)
    got = P.compare_output("o", [ref.copy()], [ref], tol)
    assert got.compared == 0 and got.status == "not_checked", got.message
    assert "not_checked: no element to compare" in got.message
    empty = np.zeros((0, 4), np.float32)
    assert P.compare_output("o", [empty], [empty], tol).status == "not_checked"
    # one number on both sides is enough to measure; a number against the reference's NaN is a reject, as before
    partly = np.full((2, 3), np.inf, np.float32)
    assert P.compare_output("o", [partly.copy()], [partly], tol).status == "not_checked"
    partly[0, 0] = 1.0
    assert P.compare_output("o", [partly.copy()], [partly], tol).status == "pass"
    assert P.compare_output("o", [np.zeros((2, 3), np.float32)], [ref], tol).status == "reject"


def test_a_model_whose_outputs_are_all_nan_gets_no_tolerance_pass(tmp_path):
    """Real runtimes (onnx.reference and ONNX Runtime) of a model whose output is Log(-|x| - 1), NaN everywhere: the
    tolerance check of that output is not_checked, and the gate does not support the route."""
    graph = helper.make_graph(
        [
            helper.make_node("Abs", ["x"], ["a"]),
            helper.make_node("Neg", ["a"], ["n"]),
            helper.make_node("Sub", ["n", "one"], ["m"]),
            helper.make_node("Log", ["m"], ["y"]),
        ],
        "nan",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])],
        [helper.make_tensor("one", TensorProto.FLOAT, [], [1.0])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, tmp_path / "nan.onnx")
    ref = P.runtime_spec("onnx.reference", tmp_path / "nan.onnx")
    ut = P.runtime_spec("onnxruntime", tmp_path / "nan.onnx")
    checks = by_name(P.check_parity(ref, ut, inputs(), paths=PATHS))
    assert checks["parity.tolerance:y"].status == "not_checked", checks["parity.tolerance:y"].message
    assert decide(list(checks.values())) != "supported"
