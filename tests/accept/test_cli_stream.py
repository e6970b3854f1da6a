"""The one reader of `trtls build --json` for the acceptance scenarios (issue 18: Ctrl-C and the fault
scenarios had two copies): events in order, the summary whatever its key order, other lines kept."""

from __future__ import annotations

import json

from trtls.accept.cli_run import read_build_stream


def _event(**fields: object) -> str:
    return json.dumps({"v": 1, "t_ns": 1, **fields}) + "\n"


def test_the_stream_gives_events_in_order_the_summary_and_the_rest() -> None:
    lines = [
        _event(type="phase_start", phase_id="0", parent_id=None, name="Building engine", num_steps=6),
        "a line a library printed\n",
        _event(type="step", phase_id="0", step=1),
        _event(type="phase_finish", phase_id="0"),
        # json.dumps(sort_keys=True) or another writer puts "summary" first: still the summary
        json.dumps({"summary": {"outcome": "cancelled", "cancelSource": "ctrl_c"}, "type": "summary"}) + "\n",
    ]
    seen: list[str] = []
    summary, other = read_build_stream(lines, lambda ev: seen.append(ev.type))
    assert seen == ["phase_start", "step", "phase_finish"]
    assert summary == {"outcome": "cancelled", "cancelSource": "ctrl_c"}
    assert other == ["a line a library printed"]


def test_no_summary_is_none_not_a_guess() -> None:
    summary, other = read_build_stream([_event(type="phase_finish", phase_id="0"), "{not json\n"], lambda ev: None)
    assert summary is None and other == ["{not json"]
