"""A table's known-good record is written one build per line by json's C encoder (issue 31: an indented dump of 200
builds took 15 ms of every build's end), and a record written indented before is read and extended as it was."""

from __future__ import annotations

import json
from pathlib import Path

from trtls.store.known_good import FORMAT, KnownGood, records_text

KEY = "a" * 64


def _build(n: int) -> dict[str, object]:
    return {"buildId": f"b{n}", "key": KEY, "sha256": "0" * 64, "parts": {"onnx": "ü", "n": [n, 1.5, None, True]}}


def test_one_build_per_line_and_the_same_json() -> None:
    recs = [_build(1), _build(2)]
    text = records_text(recs)
    assert json.loads(text) == {"format": FORMAT, "builds": recs}
    assert text.endswith("\n") and text.splitlines()[1:3] == [json.dumps(recs[0]) + ",", json.dumps(recs[1])]


def test_a_record_written_indented_is_read_and_extended(tmp_path: Path) -> None:
    state = tmp_path / ".trtls"
    (state / "engines").mkdir(parents=True)
    path = state / "engines" / "demo.json"
    path.write_text(json.dumps({"format": FORMAT, "builds": [_build(1)]}, indent=1) + "\n")
    known = KnownGood(state, "demo")
    assert known.append(_build(2)) is None
    assert [r["buildId"] for r in KnownGood(state, "demo").records()] == ["b1", "b2"]
    assert len(path.read_text().splitlines()) == 4  # the header, two builds, the end
