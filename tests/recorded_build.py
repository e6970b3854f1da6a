"""A real recorded TensorRT-RTX build (`large`'s --json event stream) replayed into a supervisor's Build, under a
frozen clock: the tests that show one state rendered by every face start here (tests/test_one_truth_faces.py,
tests/core/test_build_state.py)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from trtls.builds.supervisor.build import Build
from trtls.core.events import parse_event

LARGE_TRACE = Path(__file__).parent / "data" / "trt-rtx-traces" / "large_events.jsonl"


def large_events() -> list[Any]:
    return [parse_event(line) for line in LARGE_TRACE.read_text().splitlines()]


def frozen_clock(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """`time.monotonic_ns` answers `held["now"]`: every face reads the clock once per render, so one fixed `now`
    makes the running phases' times one value."""
    held = {"now": 0}
    monkeypatch.setattr(time, "monotonic_ns", lambda: held["now"])
    return held


def replayed_build(tmp_path: Path, evs: list[Any], build_id: str = "large-1") -> Build:
    """A supervisor's Build of `large` (no worker, no history) that started when its recording did, `evs` folded."""
    b = Build(build_id, "large", tmp_path / "trtls.toml", {"output": str(tmp_path / "large.engine")}, 5.0, ["w"])
    b.state.t_start_ns = evs[0].t_ns
    for ev in evs:
        b.fold(ev)
    return b
