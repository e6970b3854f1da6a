"""A farm cell's phase tree goes to the client as deltas: replayed from a real recorded TensorRT-RTX trace, the
client's merge of every notification equals the whole tree at every point, and the deltas are smaller."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from trtls.core.phase_tree import OpenPhases, PhaseTree
from trtls.lsp import matrix_relay
from trtls.lsp.matrix_relay import MatrixRelay

TRACE = Path(__file__).parents[1] / "data" / "trt-rtx-traces" / "trace_full.jsonl"


class CellFromTrace:
    """The two things the relay reads from a cell (`id`, `snapshot()`), over a real PhaseTree fed callback by
    callback from a recorded trace; the rest of a Build is not involved in the delta."""

    def __init__(self) -> None:
        self.id = "m1:cell"
        self.tree = PhaseTree()
        self.names = OpenPhases()
        self.now = 0

    def feed(self, r: dict[str, Any]) -> None:
        self.now = r.get("t_ns", self.now)
        if r["ev"] == "phase_start":
            pid, parent = self.names.start(r["phase"], r.get("parent"))
            self.tree.start(pid, parent, r["phase"], r["num_steps"], self.now)
        elif r["ev"] == "step_complete" and (pid := self.names.id_of(r["phase"])) is not None:
            self.tree.step(pid, r["step"], self.now)
        elif r["ev"] == "phase_finish" and (pid := self.names.finish(r["phase"])) is not None:
            self.tree.finish(pid, self.now, "done")

    def snapshot(self) -> dict[str, Any]:
        return {"buildId": self.id, "phases": self.tree.snapshot(self.now)}


def callbacks() -> list[dict[str, Any]]:
    records = [json.loads(line) for line in TRACE.read_text().splitlines() if line.strip()]
    return [r for r in records if r["ev"] in ("phase_start", "step_complete", "phase_finish")]


def merge(held: dict[str, dict], payload: dict[str, Any]) -> dict[str, dict]:
    """What extension/src/buildTree.ts does with a notification."""
    incoming = {p["id"]: p for p in payload["phases"]}
    return {**held, **incoming} if payload.get("phasesDelta") else incoming


def test_merged_deltas_equal_the_whole_tree_at_every_point(monkeypatch) -> None:
    monkeypatch.setattr(matrix_relay, "FULL_TREE_INTERVAL_S", 1e9)  # only the first notification is whole
    relay = MatrixRelay.__new__(MatrixRelay)  # only the delta state: no client, no matrix
    relay.sent_phases, relay.full_sent_at = {}, {}
    cell = CellFromTrace()
    client: dict[str, dict] = {}
    whole_bytes = delta_bytes = deltas = 0
    records = callbacks()
    assert len(records) > 100
    for i, r in enumerate(records):
        cell.feed(r)
        if i % 7:  # a notification every few callbacks, as the pump would send
            continue
        payload = relay._cell_tree(cell, now=float(i), whole=False)
        client = merge(client, payload)
        whole = cell.snapshot()["phases"]
        assert client == {p["id"]: p for p in whole}, f"after record {i}"
        if payload.get("phasesDelta"):
            deltas += 1
            delta_bytes += len(json.dumps(payload["phases"]))
            whole_bytes += len(json.dumps(whole))
    assert deltas > 10
    assert delta_bytes < whole_bytes / 2, (delta_bytes, whole_bytes)


def test_a_finished_cell_and_the_first_notification_are_whole() -> None:
    relay = MatrixRelay.__new__(MatrixRelay)
    relay.sent_phases, relay.full_sent_at = {}, {}
    cell = CellFromTrace()
    for r in callbacks()[:40]:
        cell.feed(r)
    assert cell.tree.phases
    assert "phasesDelta" not in relay._cell_tree(cell, now=0.0, whole=False)
    assert relay._cell_tree(cell, now=1.0, whole=False).get("phasesDelta") is True
    assert "phasesDelta" not in relay._cell_tree(cell, now=2.0, whole=True)
