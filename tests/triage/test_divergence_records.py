"""A divergence search's gate-4 re-run (`parityRerun`) and TensorRT comparison (`tensorrt`) are declared models, not
free JSON objects (issue 28, typed seams): every variant their writers write loads and dumps back key for key and in
order, a field of the wrong type or a key no writer writes is refused with its place, the readers take attributes,
and the TensorRT child's result.json that is not a comparison is an `error` of the comparison, not the search's end."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from pydantic import ValidationError

from tests.triage.test_reduce_cases import _engine
from trtls.core.recipe import load_recipe
from trtls.core.triage_records import DivergenceResult, ParityRerun, TensorrtLayers
from trtls.triage.diverge import TensorError
from trtls.triage.trt_layers_run import UNAVAILABLE, child_answer, not_checked

FIRST = TensorError("h", "norm", "LayerNormalization", 0.5, 0.2, 0.3, 0, False).record()
WITHIN = TensorError("y", "out", "MatMul", 1e-4, 1e-3, 1e-3, 0, True).record()
OVERFLOW = TensorError("n", "soft", "Softplus", float("inf"), float("inf"), float("inf"), 12, False).record()
EDIT = {"title": "Keep norm in its original precision (exclude_nodes)",
        "edits": [{"range": [7, 0, 7, 0], "newText": 'exclude_nodes = ["norm"]\n'}]}  # fmt: skip
CHECKS = [
    {"name": "parity.tolerance:y", "status": "pass", "code": "TRT805", "message": "within", "stats": {"max": 1e-3}},
    {"name": "parity.reference_independent", "status": "not_checked", "code": "TRT806", "message": "none",
     "waived": "a made-up model"},
]  # fmt: skip
# every shape rerun_parity / diverge_run._parity_rerun write, in their key order
RAN_ON_A_WHAT_IF_BUNDLE = {
    "gates": [4], "excludeNodesAdded": ["norm"], "recipeEdit": EDIT, "bundle": ".trtls/reduce/d/fixed.bundle",
    "bundleSection": "model.onnx", "bundleIsTheConversion": True, "status": "ran",
    "runtimeModel": ".trtls/reduce/d/converted.onnx", "decision": "supported", "parityPasses": True, "checks": CHECKS,
}  # fmt: skip
RAN_ON_AN_ENGINE_ROUTE = {
    "gates": [4], "excludeNodesAdded": ["norm"], "recipeEdit": EDIT, "status": "ran",
    "runtimeModel": ".trtls/reduce/d/converted.onnx", "decision": "hold", "parityPasses": True, "checks": CHECKS[:1],
}  # fmt: skip
STOPPED = {"gates": [4], "excludeNodesAdded": ["norm"], "recipeEdit": EDIT, "bundle": "b",
           "bundleSection": "model.onnx", "bundleIsTheConversion": None, "status": "cancelled"}  # fmt: skip
NO_EDIT = {"gates": [4], "excludeNodesAdded": ["norm"], "recipeEdit": None, "status": "not_run",
           "reason": "no place in the recipe for the exclude_nodes edit"}  # fmt: skip
# what trt_layers (the child) and trt_layers_run (the parent) write
COMPARED = {
    "status": "compared", "rule": "range-relative", "module": "tensorrt_rtx", "version": "1.2.0", "markedOutputs": 3,
    "engineBytes": 40960, "outputsPass": False, "firstDiverging": FIRST, "next": [OVERFLOW],
    "tensors": [FIRST, OVERFLOW, WITHIN],
}  # fmt: skip
REFUSED_BY_THE_RUNTIME = not_checked(
    "the runtime refused", detected="deserializing the built engine", module="tensorrt_rtx", version="1.2.0",
    markedOutputs=3, engineBytes=40960,
)  # fmt: skip


def _search(**extra: Any) -> dict[str, Any]:
    """A conversion search's record as diverge_run writes it (its rounds aside)."""
    return {
        "kind": "divergence", "id": "diverge-enc-1", "engine": "enc", "route": "r",
        "precisionTable": "engines.enc.precision", "precision": "fp16", "reference": "enc.onnx", "inputs": "in.npz",
        "rule": "range-relative", "rangeRtol": 0.03, "outputTolerances": {}, "firstDiverging": FIRST,
        "proposal": {"precision.exclude_nodes": ["norm"]}, "fixAsked": True, "fixed": True, "excludeNodes": ["norm"],
        "widened": [], "cancelled": False, "cancelSource": None, "rounds": [], "ranHere": "onnxruntime (CPU)",
        "parityRerun": None, **extra,
    }  # fmt: skip


def _written_variants(tmp_path: Path) -> list[dict[str, Any]]:
    """The re-runs that do not run, as the real writers write them (no gate, no model needed)."""
    from trtls.triage.diverge_run import _parity_rerun
    from trtls.triage.parity_rerun import rerun_parity

    (tmp_path / "trtls.toml").write_text(_engine("m", "m.onnx", "[N, 4]", smem=False))
    loaded = load_recipe(tmp_path / "trtls.toml")
    setup = SimpleNamespace(spec={"exclude_nodes": ["norm"]}, route="r", engine="m")
    token = SimpleNamespace(is_set=False)
    unfixed = SimpleNamespace(fixed=False, rounds=[], excluded=[])
    nothing_added = SimpleNamespace(fixed=True, rounds=[{}], excluded=["norm"])
    return [
        _parity_rerun(loaded, setup, unfixed, tmp_path, token, print),  # type: ignore[arg-type]
        _parity_rerun(loaded, setup, nothing_added, tmp_path, token, print),  # type: ignore[arg-type]
        rerun_parity(loaded, "r", "m", [], tmp_path / "c.onnx", tmp_path, token),  # type: ignore[arg-type]
    ]


def test_every_re_run_and_comparison_a_writer_writes_loads_and_dumps_back_as_written(tmp_path: Path) -> None:
    reruns = [RAN_ON_A_WHAT_IF_BUNDLE, RAN_ON_AN_ENGINE_ROUTE, STOPPED, NO_EDIT, *_written_variants(tmp_path)]
    comparisons = [COMPARED, REFUSED_BY_THE_RUNTIME, not_checked("no GPU", detected="before building: no GPU"),
                   {"status": "cancelled", "reason": "stopped by ctrl_c"},
                   {"status": "error", "reason": "RuntimeError: the marked network did not build"}]  # fmt: skip
    for rerun in reruns:
        for tensorrt in comparisons:
            record = json.loads(json.dumps(_search(parityRerun=rerun, tensorrt=tensorrt)))  # as read from disk
            result = DivergenceResult.model_validate(record)
            assert isinstance(result.parityRerun, ParityRerun) and isinstance(result.tensorrt, TensorrtLayers)
            assert json.dumps(result.record()) == json.dumps(record), "key for key, in the writers' order"


def test_the_readers_take_attributes() -> None:
    result = DivergenceResult.model_validate(_search(parityRerun=RAN_ON_A_WHAT_IF_BUNDLE, tensorrt=COMPARED))
    rerun, trt = result.parityRerun, result.tensorrt
    assert rerun is not None and rerun.status == "ran" and rerun.decision == "supported" and rerun.parityPasses
    assert rerun.recipeEdit is not None and rerun.recipeEdit.edits[0].range == [7, 0, 7, 0]
    assert rerun.checks is not None and rerun.checks[1].waived == "a made-up model" and rerun.checks[1].stats is None
    assert trt is not None and trt.firstDiverging is not None and trt.firstDiverging.node == "norm"
    assert trt.tensors is not None and trt.tensors[1].overflow and trt.tensors[1].rangeError is None
    from trtls.cli.reduce_diverge import _rerun_line, _tensorrt_line

    said = _rerun_line(rerun)
    assert said.startswith("gate 4 re-run with exclude_nodes += ['norm'] (the what-if bundle .trtls/reduce/d/fixed")
    assert said.endswith("not_checked TRT806 parity.reference_independent: none — waived: a made-up model"), said
    assert _tensorrt_line(trt, 0.03).startswith("tensorrt layers: first tensor out of tolerance: h from node norm")
    stopped = DivergenceResult.model_validate(_search(parityRerun=STOPPED)).parityRerun
    assert stopped is not None and _rerun_line(stopped) == "gate 4 not re-run (cancelled): stopped"


@pytest.mark.parametrize(
    ("field", "damage"),
    [
        ("parityRerun.parityPasses", {"parityRerun": {**RAN_ON_AN_ENGINE_ROUTE, "parityPasses": "yes"}}),
        ("parityRerun.status", {"parityRerun": {**NO_EDIT, "status": "skipped"}}),
        (
            "parityRerun.checks.0.status",
            {"parityRerun": {**RAN_ON_AN_ENGINE_ROUTE, "checks": [{**CHECKS[0], "status": "passed"}]}},
        ),  # fmt: skip
        ("parityRerun.recipeEdit.edits", {"parityRerun": {**NO_EDIT, "recipeEdit": {"title": "t", "edits": "x"}}}),
        ("parityRerun.gate", {"parityRerun": {**NO_EDIT, "gate": 4}}),  # a key no writer writes
        ("tensorrt.status", {"tensorrt": {**COMPARED, "status": "ok"}}),
        ("tensorrt.markedOutputs", {"tensorrt": {**COMPARED, "markedOutputs": "3"}}),
        (
            "tensorrt.firstDiverging.withinTolerance",
            {"tensorrt": {**COMPARED, "firstDiverging": {**FIRST, "withinTolerance": 0}}},
        ),  # fmt: skip
        ("tensorrt", {"tensorrt": ["compared"]}),
    ],
)
def test_a_damaged_field_is_refused_with_its_place(field: str, damage: dict[str, Any]) -> None:
    with pytest.raises(ValidationError) as raised:
        DivergenceResult.model_validate(_search(**damage))
    assert ".".join(str(part) for part in raised.value.errors()[0]["loc"]) == field, raised.value


def test_a_childs_result_that_is_not_a_comparison_is_an_error_not_the_searchs_end(tmp_path: Path) -> None:
    path = tmp_path / "result.json"
    assert child_answer(path, 1, tmp_path).record() == {
        "status": "error", "reason": "the TensorRT child ended (exit 1) without a result"}  # fmt: skip
    path.write_text(json.dumps({**COMPARED, "tensors": [{"tensor": "h"}]}))
    answer = child_answer(path, 0, tmp_path)
    assert answer.status == "error" and answer.reason is not None and "tensors.0.node" in answer.reason, answer
    path.write_text(json.dumps(REFUSED_BY_THE_RUNTIME))
    assert child_answer(path, 0, tmp_path).record() == REFUSED_BY_THE_RUNTIME
    assert REFUSED_BY_THE_RUNTIME["reason"] == f"{UNAVAILABLE}: the runtime refused"
