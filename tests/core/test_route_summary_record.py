"""A route's gates-run record as its model (core.route_summary_record.RouteSummary, issue 28, typed seams): every
route summary the gates write loads, and `record()` is the file's JSON byte for byte — summary.json,
complete-summary.json and `trtls gates --format json` — so the model changes no byte anyone reads. Old records
(keys missing, keys never declared) still load.

`assert_route_summaries_round_trip` is also run over every route summary the route and gates tests wrote in a
session (tests/gates/conftest.py, tests/route/conftest.py)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from trtls.core.route_summary_record import (
    ROUTE_SUMMARY_FORMAT,
    CheckRow,
    GateRow,
    RouteSummary,
    loaded_route_summary,
    route_summary_of,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "gates"))

from _route_helpers import checkpoint_files, load, make_folder, route_table, write_recipe

COMMIT = "c" * 40
ROUTE_FILES = ("summary.json", "complete-summary.json")


def assert_route_summaries_round_trip(root: Path) -> int:
    """Every route summary the gates wrote under `root` (its `format` theirs: a test's damaged or hand-made record is
    not one) loads as a RouteSummary and writes back byte for byte; how many there were."""
    seen = 0
    for path in sorted(p for name in ROUTE_FILES for p in root.glob(f"**/.trtls/routes/*/{name}")):
        if not path.is_file() or path.is_symlink():
            continue
        text = path.read_text(errors="replace")
        try:
            data = json.loads(text)
        except (ValueError, RecursionError):
            continue
        if not isinstance(data, dict) or data.get("format") != ROUTE_SUMMARY_FORMAT:
            continue
        summary = route_summary_of(data)
        assert isinstance(summary, RouteSummary), f"{path}: {summary}"
        assert summary.text() == text, f"{path}: the model does not write the record back byte for byte"
        seen += 1
    return seen


def _route(tmp_path: Path, **kw: str | None) -> Path:
    make_folder(tmp_path / "ck", checkpoint_files(**kw))
    return write_recipe(tmp_path, route_table("ck", COMMIT))


@pytest.mark.parametrize(
    ("license", "gates"),
    [("apache-2.0", None), ("apache-2.0", [1]), ("proprietary", None), ("apache-2.0", [1, 3])],
)
def test_a_written_summary_loads_and_writes_back_byte_for_byte(
    tmp_path: Path, license: str, gates: list[int] | None
) -> None:
    from trtls.gates.run import run_gates

    res = run_gates(load(_route(tmp_path, license=license)), "r", gates=gates)
    folder = tmp_path / ".trtls" / "routes" / "r"
    text = (folder / "summary.json").read_text()
    assert isinstance(res.summary, RouteSummary) and res.summary.text() == text
    loaded = RouteSummary.model_validate(json.loads(text))
    assert loaded.text() == text and loaded.record() == json.loads(text)
    assert list(loaded.record()) == list(json.loads(text)), "the keys in the order written"
    assert loaded.route_name == "r" and loaded.format == "trtls.route-summary/1"
    assert loaded.decision == res.decision and loaded.gates_run == (gates or [1, 2, 3, 4, 5])
    row = loaded.gate(1)
    assert isinstance(row, GateRow) and row.checks and isinstance(row.checks[0], CheckRow)
    assert row.checks[0].name == "revision_pinned"
    assert loaded.shared is not None and "record" in loaded.record()
    assert (folder / "complete-summary.json").exists() == (gates is None)
    assert assert_route_summaries_round_trip(tmp_path) == 1 + (gates is None)


def test_the_cli_json_is_the_record_byte_for_byte(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import onnx
    from onnx import TensorProto, helper

    from trtls.cli.main import main

    recipe = _route(tmp_path)  # the CLI checks the recipe first: its engine's ONNX a real one
    x, y = (helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 4]) for n in "xy")
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(tmp_path / "m.onnx"))
    assert main(["gates", str(recipe), "--route", "r", "--format", "json"]) == 3  # hold: no build evidence
    out = capsys.readouterr().out
    folder = tmp_path / ".trtls" / "routes" / "r"
    assert out == (folder / "summary.json").read_text() == (folder / "complete-summary.json").read_text()
    assert RouteSummary.model_validate(json.loads(out)).text() == out


def test_an_old_record_loads_and_keeps_what_it_had() -> None:
    old = {
        "route_name": "r",
        "decision": "hold",
        "someday": {"kept": [1, 2.5, None]},
        "gates": {"1": {"status": "pass", "checks": [{"status": "pass", "name": "x", "extra": 1}]}},
        "generatedAt": "2025-01-01T00:00:00Z",
    }
    summary = RouteSummary.model_validate(old)
    assert summary.record() == old and list(summary.record()) == list(old)
    assert summary.complete is None and summary.rested_on is None and summary.hold_reasons == []
    assert summary.gate(2) is None and summary.gate(1) is not None
    assert json.dumps(summary.record()) == json.dumps(old)


def test_a_damaged_record_is_said_not_raised() -> None:
    assert loaded_route_summary({"decision": "maybe"}) is None and loaded_route_summary([1]) is None
    assert getattr(loaded_route_summary({"decision": "supported"}), "decision", None) == "supported"
    assert route_summary_of([]) == "not a route summary"
    assert route_summary_of({"route_name": "r"}) == "not a route summary"
    problem = route_summary_of({"gates": {"1": {"status": "exploded"}}})
    assert isinstance(problem, str) and "gates.1.status" in problem


def test_nan_is_written_as_json_writes_it() -> None:
    data = {"gates": {}, "record": {"x": float("nan"), "y": float("inf")}}
    assert RouteSummary.written(data).text() == json.dumps(data, indent=2) + "\n"
