"""`trtls report --reduction` of a divergence search whose fp16 conversion overflowed: made-up records (no
ModelOpt), one written with the overflow flag and null errors (as trtls writes it now), one as older records were
(`Infinity`). The page must draw the overflowed layer as a full-height bar labelled 'overflow', never `nan`. The
page reads both records through their models (core.triage_records): a damaged field is a located error."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from trtls.report.reduction_page import reduction_report


def _tensor(name: str, error: float | None, within: bool, nonfinite: int = 0) -> dict:
    return {
        "tensor": name,
        "node": f"n_{name}",
        "op": "MatMul",
        "maxAbsError": error,
        "rangeError": error,
        "relL2": error,
        "nonFinite": nonfinite,
        "overflow": nonfinite > 0,
        "withinTolerance": within,
    }


def _record(tensors: list[dict]) -> dict:
    """A search's divergence.json as trtls.triage.diverge_run writes it."""
    first = next(t for t in tensors if t["withinTolerance"] is False)
    return {
        "kind": "divergence",
        "id": "diverge-enc-1",
        "engine": "enc",
        "route": None,
        "precisionTable": "engines.enc.precision",
        "precision": "fp16",
        "reference": "enc.onnx",
        "inputs": "inputs.npz",
        "rule": "…",
        "rangeRtol": 0.03,
        "outputTolerances": {},
        "firstDiverging": first,
        "proposal": {"precision.exclude_nodes": [first["node"]]},
        "fixAsked": False,
        "fixed": None,
        "excludeNodes": [],
        "widened": [],
        "cancelled": False,
        "cancelSource": None,
        "rounds": [
            {
                "excludeNodes": [],
                "convertedModel": "enc.fp16.onnx",
                "outputsPass": False,
                "outputErrors": {"y": None},
                "outputRangeError": None,
                "firstDiverging": first,
                "next": [],
                "tensors": tensors,
            }
        ],
        "ranHere": "onnxruntime (CPU) for both models",
        "parityRerun": None,
    }


@pytest.mark.parametrize("written", ["null + overflow flag", "Infinity (an older record)"])
def test_an_overflowed_layer_is_a_full_height_bar_labelled_overflow(tmp_path: Path, written: str) -> None:
    tensors = [
        _tensor("h0", 1e-3, True),
        _tensor("h", None, False, nonfinite=45),
        _tensor("n", None, False, nonfinite=256),
        _tensor("y", 2e-3, True),
    ]
    record = _record(tensors)
    if written.startswith("null"):
        text = json.dumps(record, allow_nan=False)
    else:
        for t in tensors[1:3]:
            t.pop("overflow")
            t["rangeError"] = t["maxAbsError"] = float("inf")
        del record["cancelSource"], record["rounds"][0]["outputRangeError"]  # written since, as the flag
        text = json.dumps(record)
        assert "Infinity" in text
    (tmp_path / "divergence.json").write_text(text)
    html = reduction_report(tmp_path)
    svg = html[html.index("<svg") : html.index("</svg>")]
    numbers = svg.replace("inf/NaN values", "").lower()  # the words of an overflow's title aside
    assert "nan" not in numbers and "inf" not in numbers, svg
    bars = re.findall(r'<rect class="overflow" x="[\d.]+" y="([\d.]+)" width="6" height="([\d.]+)"', svg)
    assert len(bars) == 2, svg  # h and n, and only those
    assert all(float(y) == 40.0 and float(h) == 140.0 for y, h in bars), bars  # from the top to the axis
    assert svg.count(">overflow</text>") == 2
    assert "overflow: 45 inf/NaN values" in svg
    assert len(re.findall(r"<circle ", svg)) == 2  # h0 and y keep their points


def test_a_tensor_nothing_was_compared_in_is_a_hollow_mark_not_a_passing_point(tmp_path: Path) -> None:
    """A tensor whose reference holds only inf/NaN (withinTolerance null, every element notCompared): no error is
    drawn for it (its 0 over no element is no measurement), a hollow mark on the axis says not_checked."""
    unchecked = {**_tensor("l", 0.0, True), "withinTolerance": None, "notCompared": 32}
    tensors = [_tensor("h0", 1e-3, True), unchecked, _tensor("y", 0.5, False)]
    (tmp_path / "divergence.json").write_text(json.dumps(_record(tensors), allow_nan=False))
    svg = (html := reduction_report(tmp_path))[html.index("<svg") : html.index("</svg>")]
    hollow = re.findall(r'<circle class="not-checked" cx="[\d.]+" cy="([\d.]+)" r="3" fill="none"', svg)
    assert hollow == ["180.0"], svg  # on the axis, one mark: l
    assert "l (MatMul): not_checked, the reference holds only inf/NaN" in svg
    assert len(re.findall(r"<circle (?!class)", svg)) == 2  # h0 and y keep their points; l has none
    assert "a hollow mark on the axis: not_checked" in html


@pytest.mark.parametrize(("text", "words"), [("[1, 2]", "not a reduction's"), ("{nope", "not valid JSON")])
def test_a_record_that_is_no_record_is_a_located_error(tmp_path: Path, text: str, words: str) -> None:
    from trtls.report.evidence import EvidenceError

    (tmp_path / "result.json").write_text(text)
    with pytest.raises(EvidenceError, match=words) as raised:
        reduction_report(tmp_path)
    assert str(raised.value).startswith(str(tmp_path / "result.json"))


def _trial(index: int, nodes: int, still_fails: bool) -> dict:
    return {"trial": index, "step": "bisect", "nodes": nodes, "firstNode": 0, "lastNode": nodes - 1, "buildId": "b",
            "outcome": "failed" if still_fails else "built", "stillFails": still_fails, "failure": None,
            "seconds": 1.0}  # fmt: skip


def _reduction() -> dict:
    """A reduction's result.json as trtls.triage.evidence writes it (a made-up one: two trials)."""
    verdict = {"outcome": "failed", "stillFails": True}
    return {
        "kind": "reduction", "id": "reduce-m-1", "engine": "m", "recipe": "trtls.toml", "onnx": "m.onnx",
        "outcome": "reduced", "error": None, "errorCode": None, "headline": "reduce m", "rule": "same failure",
        "failRegex": None, "failRegexFrom": None, "failure": {"kind": "parser_rejection", "layer": "det"},
        "failureText": "the parser refused det", "cause": "node", "causeText": "the node det", "causeSettings": {},
        "settingsNotTried": None, "stoppedBy": None, "stoppedDuringTrial": None, "trialsAtStop": None,
        "originalNodes": 4, "minimalPath": "minimal.onnx",
        "minimal": {"path": "minimal.onnx", "nodes": 1, "nodeNames": ["det"], "inputs": ["x"], "outputs": ["y"],
                    "profiles": []},
        "minGood": None, "reusedBuild": None, "trialsUsed": 2, "trialsBuilt": 2, "resumedFrom": None,
        "resumeNote": None,
        "resume": {"modelSha256": None, "recipeSha256": None, "failure": None, "smallest": None,
                   "verdicts": {"confirm": verdict}},
        "trialsByStep": {"bisect": 2}, "bisectBound": 2, "trials": [_trial(0, 4, True), _trial(1, 1, True)],
    }  # fmt: skip


def test_a_reductions_page_draws_its_trials_from_the_model(tmp_path: Path) -> None:
    (tmp_path / "result.json").write_text(json.dumps(_reduction()))
    html = reduction_report(tmp_path)
    assert "<dd>1 nodes: det</dd>" in html and "<dd>2 (bisect 2); bisection bound 2</dd>" in html
    assert html.count('fill="#c0392b"><title>trial') == 2 and "trial 1 bisect: 1 nodes, still fails" in html


def _wrong_error(record: dict) -> None:
    record["rounds"][0]["tensors"][1]["rangeError"] = "large"


def _wrong_trial(record: dict) -> None:
    record["trials"][1]["stillFails"] = "yes"


def _no_tensor(record: dict) -> None:
    del record["rounds"][0]["tensors"][0]["tensor"]


@pytest.mark.parametrize(
    ("name", "damage", "field"),
    [
        ("divergence.json", _wrong_error, "rounds.0.tensors.1.rangeError"),
        ("divergence.json", _no_tensor, "rounds.0.tensors.0.tensor"),
        ("result.json", _wrong_trial, "trials.1.stillFails"),
        ("result.json", lambda r: r.update(minimal={"nodes": "1"}), "minimal.path"),
    ],
)
def test_a_damaged_field_is_an_error_naming_the_file_and_the_field(
    tmp_path: Path, name: str, damage: object, field: str
) -> None:
    """A field of the wrong type (or missing) used to be drawn as it was — a "yes" trial still failing, a string
    error a traceback: the page reads the record through its model, so it is the same located error every reader
    gives."""
    from trtls.report.evidence import EvidenceError

    written = _reduction() if name == "result.json" else _record([_tensor("h0", 1e-3, True), _tensor("h", 0.5, False)])
    record = json.loads(json.dumps(written))  # as read from disk: the first diverging tensor is not its round's
    assert callable(damage)
    damage(record)
    (tmp_path / name).write_text(json.dumps(record))
    with pytest.raises(EvidenceError) as raised:
        reduction_report(tmp_path)
    said = str(raised.value)
    assert said.startswith(f"{tmp_path / name}: not a ") and f" {field} is " in said, said


def test_a_record_behind_a_link_out_of_the_recipes_folder_is_refused(tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "divergence.json").write_text(json.dumps(_record([_tensor("h", 0.5, False)])))
    folder = tmp_path / "ws" / ".trtls" / "reduce"
    folder.mkdir(parents=True)
    (folder / "diverge-enc-1").symlink_to(outside)
    from trtls.report.evidence import EvidenceError

    with pytest.raises(EvidenceError, match="leads out of"):
        reduction_report(folder / "diverge-enc-1")


def test_a_name_with_control_and_bidi_characters_is_written_visibly_on_the_page(tmp_path: Path) -> None:
    """A node name a model carried (`n0` ESC [31m U+202E `evil` BEL) is shown as `\\x1b`, `\\u202e`, `\\x07` on the
    page, never raw: the page's one escape (report.page.esc) applies the terminal's rule after HTML's."""
    from trtls.report.page import esc

    name = "n0\x1b[31m\u202eevil\x07"
    assert esc(name) == "n0\\x1b[31m\\u202eevil\\x07" and esc("<b>") == "&lt;b&gt;"
    tensors = [_tensor("h0", 1e-3, True), {**_tensor("y", 0.5, False), "node": name, "tensor": name}]
    (tmp_path / "divergence.json").write_text(json.dumps(_record(tensors), allow_nan=False))
    page = reduction_report(tmp_path)
    assert "\x1b" not in page and "\u202e" not in page and "\x07" not in page
    assert "n0\\x1b[31m\\u202eevil\\x07" in page
