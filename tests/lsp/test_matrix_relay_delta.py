"""A farm cell's phase tree goes to the client as deltas. Replayed from a real recorded TensorRT-RTX build (the
event stream of `large`), every notification the relay makes is put through the extension's real TypeScript model
(BuildTreeModel.update, via tests/ts_replay.py): after each one, the phases VS Code holds equal the whole tree at
that point — the build's own snapshot at the same instant (the build's clock held still), not the relay's memory of
what it sent, so a relay that diffs against the wrong tree fails — and the deltas are smaller than whole trees."""

from __future__ import annotations

import json
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from trtls.builds.supervisor.supervisor import Build
from trtls.core import build_view as build_module  # the view reads the clock
from trtls.core import wire
from trtls.core.events import parse_event
from trtls.lsp import matrix_relay
from trtls.lsp.matrix_relay import MatrixRelay

from ..ts_replay import replay

TRACE = Path(__file__).parents[1] / "data" / "trt-rtx-traces" / "large_events.jsonl"


def cell() -> Build:
    return Build("m1:cell", "large", Path("/w/trtls.toml"), {"output": "/w/large.engine"}, 5.0, ["worker"],
                 cell="cell", parent_id="m1")  # fmt: skip


def phase_events() -> list[Any]:
    evs = [parse_event(line) for line in TRACE.read_text().splitlines()]
    return [e for e in evs if e.type in ("phase_start", "step", "phase_finish")]


def bare_relay() -> MatrixRelay:
    relay = MatrixRelay.__new__(MatrixRelay)  # only the delta state: no client, no matrix
    relay.sent_phases, relay.full_sent_at, relay.uri = {}, {}, "file:///w/trtls.toml"
    return relay


def by_id(phases: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {p["id"]: p for p in phases}


def held_clock(monkeypatch) -> list[int]:
    """The build's monotonic clock, set by the test: two snapshots at one instant are the same tree."""
    now = [time.monotonic_ns()]
    frozen = SimpleNamespace(monotonic_ns=lambda: now[0], time=time.time, strftime=time.strftime)
    monkeypatch.setattr(build_module, "time", frozen)
    return now


def test_the_extensions_merge_of_every_delta_is_the_whole_tree(monkeypatch) -> None:
    monkeypatch.setattr(matrix_relay, "FULL_TREE_INTERVAL_S", 1e9)  # only the first notification is whole
    clock = held_clock(monkeypatch)
    relay, b = bare_relay(), cell()
    payloads: list[dict[str, Any]] = []
    wholes: list[dict[str, dict[str, Any]]] = []
    events = phase_events()
    assert len(events) > 500
    for i, ev in enumerate(events):
        b.tree.apply(ev)
        if i % 7:  # a notification every few events, as the pump would send
            continue
        clock[0] += 250_000_000  # a notification's worth of time passes: running rows change their words
        payloads.append(wire.to_wire(relay._cell_tree(b, now=float(i), whole=False)))
        wholes.append(by_id(b.snapshot()["phases"]))  # the build's whole tree at that instant
    held = replay(payloads)["held"]
    assert len(held) == len(payloads)
    for k, (phases, whole) in enumerate(zip(held, wholes, strict=True)):
        assert by_id(phases) == whole, f"after notification {k}"
    deltas = [p for p in payloads if p.get("phasesDelta")]
    assert len(deltas) > 10
    delta_bytes = sum(len(json.dumps(p["phases"])) for p in deltas)
    whole_bytes = sum(len(json.dumps(list(wholes[payloads.index(p)].values()))) for p in deltas)
    assert delta_bytes < whole_bytes / 2, (delta_bytes, whole_bytes)


def test_a_finished_cell_and_the_first_notification_are_whole() -> None:
    relay, b = bare_relay(), cell()
    for ev in phase_events()[:40]:
        b.tree.apply(ev)
    assert b.tree.phases
    assert relay._cell_tree(b, now=0.0, whole=False).phasesDelta is False
    assert relay._cell_tree(b, now=1.0, whole=False).phasesDelta is True
    assert relay._cell_tree(b, now=2.0, whole=True).phasesDelta is False
