"""The triage runs' records are declared models at the application layer's seam (issue 28, typed seams): a
reduction's result.json is a `ReductionResult` (written and read back as the same JSON, key for key and in order), a
damaged one is a located problem naming its field on the face that reads it (never a traceback or a silent None),
and the app layer's runs return the models (`ReductionRun.run`, `DivergenceRun.run`), not dicts."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from pygls.exceptions import JsonRpcInvalidParams

from tests.triage.test_reduce_cases import _chain, _engine
from trtls.app.triage_runs import DivergenceRun, ReductionRun
from trtls.core.cancel import CancelToken
from trtls.core.recipe import load_recipe
from trtls.core.triage_records import (
    DivergenceResult,
    FailureSignature,
    ReductionResult,
    ResultProblem,
    read_divergence_result,
    read_reduction_result,
)
from trtls.triage.reduce_build import new_reduction
from trtls.triage.trials import TrialRunner

SERVER = Path(__file__).resolve().parents[2] / "server" / "trtls"


def _reduce_cli(ws: Path, engine: str) -> tuple[int, dict, str]:
    proc = subprocess.run(
        [sys.executable, "-m", "trtls", "reduce", str(ws), "--engine", engine, "--json"],
        capture_output=True,
        text=True,
        timeout=900,
    )
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    assert lines, proc.stderr[-2000:]
    return proc.returncode, json.loads(lines[-1]), proc.stderr


def test_a_real_reductions_result_json_round_trips_through_the_model(tmp_path: Path) -> None:
    """A real TensorRT-RTX reduction (the parser refuses Det): result.json read through the one reader is the model,
    and the model written back is the file byte for byte; `--json` prints that same record."""
    ops = [("Relu", "relu"), ("Sigmoid", "sig"), ("Det", "det"), ("Neg", "neg")]
    _chain(tmp_path / "m.onnx", ops, ["N", 4, 4], ["N"])
    (tmp_path / "trtls.toml").write_text(_engine("m", "m.onnx", "[N, 4, 4]", smem=False))
    code, printed, stderr = _reduce_cli(tmp_path, "m")
    assert code == 0 and printed["outcome"] == "reduced", stderr[-2000:]
    path = tmp_path / ".trtls" / "reduce" / printed["id"] / "result.json"
    text = path.read_text()
    result = read_reduction_result(path)
    assert isinstance(result, ReductionResult), result
    assert json.dumps(result.record(), indent=2, default=str) == text, "the model writes the file it read"
    assert list(result.record()) == list(json.loads(text)) and result.record() == printed
    assert isinstance(result.failure, FailureSignature) and result.failure.kind == "parser_rejection"
    assert result.failure.layer == "det" and result.resume.failure == result.failure
    assert result.minimal is not None and result.minimal.nodeNames == ["det"]
    assert result.resume.verdicts["confirm"].stillFails is True
    assert all(t.failure is None or t.failure.kind for t in result.trials)


def _written_result(tmp_path: Path) -> tuple[Path, dict]:
    """A reduction's result.json as the writer writes it, without building anything: a reduction whose model ONNX
    cannot load fails inside (TRT983) and its record is written all the same."""
    (tmp_path / "m.onnx").write_bytes(b"not a model")
    (tmp_path / "trtls.toml").write_text(_engine("m", "m.onnx", "[N, 4]", smem=False))
    loaded = load_recipe(tmp_path / "trtls.toml")
    red = new_reduction(loaded, "m", 3)
    run = ReductionRun(red, loaded, TrialRunner(loaded, "m", red.folder, red.id))
    import asyncio

    asyncio.run(run.run())
    path = red.folder / "result.json"
    return path, json.loads(path.read_text())


def test_the_app_layers_reduction_run_returns_the_model(tmp_path: Path) -> None:
    (tmp_path / "m.onnx").write_bytes(b"not a model")
    (tmp_path / "trtls.toml").write_text(_engine("m", "m.onnx", "[N, 4]", smem=False))
    loaded = load_recipe(tmp_path / "trtls.toml")
    red = new_reduction(loaded, "m", 3)
    run = ReductionRun(red, loaded, TrialRunner(loaded, "m", red.folder, red.id))
    import asyncio

    result = asyncio.run(run.run())
    assert isinstance(result, ReductionResult) and run.result is result
    assert result.outcome == "failed" and result.errorCode == "TRT983" and result.error
    assert read_reduction_result(red.folder / "result.json") == result, "what the run returns is what it wrote"
    assert run.record is result and result.record() == json.loads((red.folder / "result.json").read_text())
    row = run.row("file:///r")
    assert row.status == "failed" and row.evidencePath == str(red.folder / "result.json")


def test_the_app_layers_divergence_run_returns_the_model(tmp_path: Path) -> None:
    (tmp_path / "trtls.toml").write_text(_engine("m", "m.onnx", "[N, 4]", smem=False))
    loaded = load_recipe(tmp_path / "trtls.toml")
    missing = tmp_path / "nowhere.onnx"
    run = DivergenceRun("diverge-x", None, None, tmp_path / "f", CancelToken(), loaded, pair=(missing, missing))
    import asyncio

    result = asyncio.run(run.run())
    assert isinstance(result, DivergenceResult) and run.result is result
    assert run.error_code == "TRT104" and result.error and result.mode == "models" and result.firstDiverging is None
    assert result.candidate == str(missing) and run.status == "failed" and run.record is result
    assert DivergenceResult.model_validate(result.record()) == result


def _verdict(record: dict) -> None:
    record["resume"]["verdicts"]["confirm"] = {"outcome": "failed", "stillFails": "yes"}


@pytest.mark.parametrize(
    ("field", "damage"),
    [
        ("outcome", lambda r: r.update(outcome=3)),
        ("resume.verdicts.confirm.stillFails", _verdict),
        ("trials", lambda r: r.update(trials={"0": {}})),
        ("failure.layer", lambda r: r.update(failure={"kind": "parser_rejection", "layer": ["det"]})),
    ],
)
def test_a_damaged_field_is_a_located_problem(tmp_path: Path, field: str, damage: object) -> None:
    path, record = _written_result(tmp_path)
    assert callable(damage)
    damage(record)
    path.write_text(json.dumps(record, indent=2))
    problem = read_reduction_result(path)
    assert isinstance(problem, ResultProblem), problem
    assert problem.path == path and problem.field == field and field in str(problem), problem


def test_a_missing_or_unreadable_result_is_a_problem_not_a_traceback(tmp_path: Path) -> None:
    assert isinstance(read_reduction_result(tmp_path / "result.json"), ResultProblem)
    (tmp_path / "result.json").write_text("{not json")
    problem = read_reduction_result(tmp_path / "result.json")
    assert isinstance(problem, ResultProblem) and problem.field is None and "not valid JSON" in problem.message
    (tmp_path / "result.json").write_text("[]")
    assert isinstance(read_reduction_result(tmp_path / "result.json"), ResultProblem)


def test_the_editors_build_minimal_names_the_damaged_field(tmp_path: Path) -> None:
    """trtls.buildMinimal on a result.json whose minimal model's profiles are not a list: a -32602 error naming
    the file and the field, before any build (the record used to be handed to the build as it was)."""
    path, record = _written_result(tmp_path)
    record["minimal"] = {"path": "minimal.onnx", "nodes": 1, "nodeNames": ["det"], "inputs": ["x"],
                         "outputs": ["y"], "profiles": "opt"}  # fmt: skip
    path.write_text(json.dumps(record, indent=2))
    from trtls.lsp.command_args import BuildMinimalArgs
    from trtls.lsp.triage_command import build_minimal

    loaded = load_recipe(tmp_path / "trtls.toml")

    async def recipe_async(uri: str) -> object:
        return loaded

    ls = SimpleNamespace(recipe_async=recipe_async)
    args = BuildMinimalArgs(uri=(tmp_path / "trtls.toml").as_uri(), reductionId=record["id"], engine="m")
    import asyncio

    with pytest.raises(JsonRpcInvalidParams) as raised:
        asyncio.run(build_minimal(ls, args))  # type: ignore[arg-type]
    said = str(raised.value)
    assert "minimal.profiles" in said and str(path) in said, said


def test_the_runs_seams_hand_over_no_dict() -> None:
    """`run()`, `_search()` and `_failed()` of the app layer's triage runs, and the state they keep, are the
    models: no `dict[str, Any]` but the `summary` property every kind of run answers (JSON for the wire)."""
    tree = ast.parse((SERVER / "app" / "triage_runs.py").read_text())
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name != "summary" and node.returns:
            if "dict[" in ast.unparse(node.returns):
                found.append(node.name)
        if isinstance(node, ast.AnnAssign) and "dict[" in ast.unparse(node.annotation):
            found.append(ast.unparse(node.target))
    assert found == [], found


def test_a_real_divergence_search_returns_the_model_of_what_it_wrote(tmp_path: Path) -> None:
    """Two given models through the app layer's run (ONNX Runtime, for real): the run returns `DivergenceResult`,
    divergence.json is its record less `folder`, key for key and in order, and the rounds are models too."""
    from tests.triage.test_diverge_pair import _pair

    candidate = _pair(tmp_path)
    loaded = load_recipe(tmp_path / "trtls.toml")
    reference = tmp_path / "models" / "enc.onnx"
    run = DivergenceRun(
        "diverge-enc-1", "enc", None, tmp_path / ".trtls" / "reduce" / "diverge-enc-1", CancelToken(), loaded,
        pair=(reference, candidate), inputs=tmp_path / "inputs.npz",
    )  # fmt: skip
    import asyncio

    result = asyncio.run(run.run())
    assert isinstance(result, DivergenceResult) and run.error is None and run.status == "done"
    assert result.firstDiverging is not None and result.firstDiverging.node == "norm"
    (only,) = result.rounds
    assert [t.tensor for t in only.tensors] == [
        "h0",
        "a0",
        "h",
        "n",
        "y",
    ] and only.firstDiverging == result.firstDiverging
    written = (Path(str(result.folder)) / "divergence.json").read_text()
    on_disk = {k: v for k, v in result.record().items() if k != "folder"}
    assert json.dumps(on_disk, indent=2, allow_nan=False) == written
    read = read_divergence_result(Path(str(result.folder)) / "divergence.json")
    assert isinstance(read, DivergenceResult) and read.record() == on_disk, "the reader reads what the search wrote"


def test_resume_says_the_damaged_field_of_the_record_it_cannot_continue(tmp_path: Path) -> None:
    """`trtls reduce --resume` over a stopped reduction whose result.json has a field of the wrong type: the note
    names the file and the field (it used to start over as if there were no earlier reduction)."""
    from trtls.triage.resume import prepare_resume

    path, record = _written_result(tmp_path)
    record["outcome"], record["resume"]["verdicts"] = "cancelled", {"confirm": {"outcome": "failed", "stillFails": 1}}
    path.write_text(json.dumps(record, indent=2))
    loaded = load_recipe(tmp_path / "trtls.toml")
    red = new_reduction(loaded, "m", 3)
    import asyncio

    note = asyncio.run(prepare_resume(loaded, "m", red))
    assert "resume.verdicts.confirm.stillFails" in note and str(path) in note, note
    assert note.endswith("starting from the whole model") and red.resumed_from is None


def test_resume_says_a_damaged_newer_record_it_passed_over(tmp_path: Path) -> None:
    """The newest reduction's result.json is damaged and an older one reads: --resume considers the older one and
    says which newer record it passed over and why (it used to pass over it in silence)."""
    import asyncio
    import shutil

    from trtls.triage.resume import prepare_resume

    path, record = _written_result(tmp_path)
    record["outcome"], record["resume"]["verdicts"] = (
        "cancelled",
        {"confirm": {"outcome": "failed", "stillFails": True}},
    )
    path.write_text(json.dumps(record, indent=2))
    newer = path.parent.with_name(path.parent.name + "z")  # ids sort by their time: this one is newer
    shutil.copytree(path.parent, newer)
    damaged = json.loads((newer / "result.json").read_text())
    damaged["resume"]["verdicts"] = {"confirm": {"outcome": "failed", "stillFails": "yes"}}
    (newer / "result.json").write_text(json.dumps(damaged, indent=2))
    loaded = load_recipe(tmp_path / "trtls.toml")
    red = new_reduction(loaded, "m", 3)
    note = asyncio.run(prepare_resume(loaded, "m", red))
    assert path.parent.name in note, note  # the older record is the one considered
    assert "a newer reduction's record is damaged and was passed over" in note, note
    assert str(newer / "result.json") in note and "resume.verdicts.confirm.stillFails" in note, note
