"""Gate 5's smoke runs share one NaN/Inf check (issue 18: the drill and the deployed-artifact smoke had copies):
a real onnxruntime run of a model whose output is NaN fails the smoke, through both paths' function."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper

from trtls.gates.release import rollback, scratch
from trtls.runtimes import RunResult, RuntimeSpec, run_inputs


def _model(path: Path) -> Path:
    """y = log(x): NaN for a negative input, finite for a positive one."""
    graph = helper.make_graph(
        [helper.make_node("Log", ["x"], ["y"])],
        "smoke",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def test_a_nan_output_fails_the_smoke_and_names_the_request(tmp_path: Path) -> None:
    spec = RuntimeSpec("onnxruntime", model=str(_model(tmp_path / "log.onnx")), timeout_s=120)
    res = run_inputs(spec, [{"x": np.array([1.0, 2.0], np.float32)}, {"x": np.array([1.0, -1.0], np.float32)}])
    assert res.ok, res.message
    judged = rollback.finite_smoke(res)
    assert judged.status == "error" and judged.message == "smoke request 1: output 'y' has NaN/Inf"
    finite = run_inputs(spec, [{"x": np.array([1.0, 2.0], np.float32)}])
    assert rollback.finite_smoke(finite) is finite
    assert scratch.finite_smoke is rollback.finite_smoke  # the deployed-artifact smoke has no copy


def test_integer_outputs_and_failed_runs_pass_through() -> None:
    ints = RunResult("ok", outputs=[{"n": np.array([1, 2], np.int64)}])
    assert rollback.finite_smoke(ints) is ints
    failed = RunResult("error", "runtime crashed")
    assert rollback.finite_smoke(failed) is failed
