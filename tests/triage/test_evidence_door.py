"""A reduction's evidence (minimal model, trial models, result.json) is written through trtls.fs inside the
recipe's folder: a `.trtls` or `.trtls/reduce` swapped for a symlink leading out is refused at the write, said as a
located TRT413 line, and nothing is written where the link points (issue 27, items 10 and 19, for `trtls reduce`)."""

from __future__ import annotations

import json
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper

from trtls.core.paths import UnsafeWrite
from trtls.core.recipe import load_recipe
from trtls.triage.evidence import write_evidence
from trtls.triage.reduce_build import Reduction, new_reduction, run_reduction
from trtls.triage.subgraph import Candidate
from trtls.triage.trials import Trial, TrialRunner


def _model() -> onnx.ModelProto:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="relu0")], "g", [x], [y])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _reduction(ws: Path) -> Reduction:
    red = Reduction("reduce-demo-1", "demo", ws / ".trtls" / "reduce" / "reduce-demo-1")
    red.original_nodes = 3
    red.best = Candidate(_model(), 1, 1, 0, 0, ["relu0"], [])
    red.trials = [Trial(0, "confirm", 3, 0, 2, "b0", "failed", True), Trial(1, "outputs", 1, 0, 0, "b1", "built")]
    return red


def _files(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def test_the_evidence_is_written_inside_the_recipes_folder(tmp_path: Path) -> None:
    red = _reduction(tmp_path)
    red.trial_dir.mkdir(parents=True)
    for t in red.trials:
        (red.trial_dir / f"{t.index:03d}.onnx").write_bytes(b"candidate")
    record = write_evidence(red, tmp_path / "trtls.toml", tmp_path / "model.onnx")
    assert record.evidenceError is None and "evidenceError" not in record.record()
    minimal = onnx.load(str(red.folder / "minimal.onnx"))
    assert [n.name for n in minimal.graph.node] == ["relu0"]
    assert json.loads((red.folder / "result.json").read_text())["minimal"]["nodeNames"] == ["relu0"]
    assert _files(red.trial_dir) == ["000.onnx"], "the failing candidate is kept, the one that built is removed"


@pytest.mark.parametrize("swapped", [".trtls", ".trtls/reduce"])
def test_a_state_folder_swapped_for_a_symlink_is_refused_and_located(tmp_path: Path, swapped: str) -> None:
    ws, elsewhere = tmp_path / "ws", tmp_path / "elsewhere"
    elsewhere.mkdir()
    link = ws / swapped
    link.parent.mkdir(parents=True)
    link.symlink_to(elsewhere, target_is_directory=True)
    record = write_evidence(_reduction(ws), ws / "trtls.toml", ws / "model.onnx")
    error = record.evidenceError
    assert error is not None
    assert error.startswith("TRT413 ") and "the record minimal.onnx was not written" in error, error
    assert _files(elsewhere) == [], "nothing is written through the link"
    from trtls.triage.findings import reduction_finding

    shown = reduction_finding(record).message  # what the editor puts on the engine's table
    assert "TRT413" in shown and str(link) in shown, shown


async def test_a_reduce_folder_swapped_after_the_recipe_loaded_is_refused_before_any_build(
    workspace: Path, tmp_path: Path
) -> None:
    """The load-time check (TRT118) cannot see a swap made after it: the write itself refuses it."""
    loaded = load_recipe(workspace / "trtls.toml")
    assert loaded.recipe is not None
    red = new_reduction(loaded, "demo", 5)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (workspace / ".trtls").mkdir(exist_ok=True)
    (workspace / ".trtls" / "reduce").symlink_to(elsewhere, target_is_directory=True)
    await run_reduction(loaded, "demo", red, TrialRunner(loaded, "demo", red.folder, red.id))
    # the refusal is the reduction's error, said with its reason (TRT983), never raised past it
    assert red.error_code == "TRT983" and UnsafeWrite.__name__ in (red.error or "") and "outside" in (red.error or "")
    assert red.trials == [], "no trial started"
    record = write_evidence(red, loaded.path, workspace / "models" / "demo.onnx")
    assert (record.evidenceError or "").startswith("TRT413 ")
    assert _files(elsewhere) == [], "no trial model, no evidence written through the link"
    assert not (workspace / ".trtls" / "runs").exists(), "no trial build started"
