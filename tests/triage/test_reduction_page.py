"""`trtls report --reduction` of a divergence search whose fp16 conversion overflowed: made-up records (no
ModelOpt), one written with the overflow flag and null errors (as trtls writes it now), one as older records were
(`Infinity`). The page must draw the overflowed layer as a full-height bar labelled 'overflow', never `nan`."""

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
    first = next(t for t in tensors if not t["withinTolerance"])
    return {
        "kind": "divergence",
        "id": "diverge-enc-1",
        "engine": "enc",
        "route": None,
        "precision": "fp16",
        "inputs": "inputs.npz",
        "rule": "…",
        "rangeRtol": 0.03,
        "firstDiverging": first,
        "fixed": None,
        "excludeNodes": [],
        "rounds": [{"excludeNodes": [], "tensors": tensors, "next": []}],
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


@pytest.mark.parametrize(("text", "words"), [("[1, 2]", "not a reduction's"), ("{nope", "not valid JSON")])
def test_a_record_that_is_no_record_is_a_located_error(tmp_path: Path, text: str, words: str) -> None:
    from trtls.report.evidence import EvidenceError

    (tmp_path / "result.json").write_text(text)
    with pytest.raises(EvidenceError, match=words) as raised:
        reduction_report(tmp_path)
    assert str(raised.value).startswith(str(tmp_path / "result.json"))
