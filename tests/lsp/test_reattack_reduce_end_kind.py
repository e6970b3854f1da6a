"""The editor's Reduce ends with a progress whose `outcomeKind` the extension shows as success or failure. A
reduction whose trial budget (`maxTrials`) ran out before any smaller failing model — no minimal model, no cause —
ended `ok`, where the terminal exits 1; it ends `failed` now, and a reduction that found its cause ends `ok`."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from ..triage.reduce_models import failing_demo
from .raw_stdio import RawServer


def _end(s: RawServer, uri: str, **extra: Any) -> dict[str, Any]:
    arg = {"uri": uri, "engine": "demo", **extra}
    reply = s.request("workspace/executeCommand", {"command": "trtls.reduceEngine", "arguments": [arg]})
    assert "result" in reply, reply
    before = len([m for m in s.messages if m.get("method") == "$/progress"])

    def ended(m: dict[str, Any]) -> bool:
        return m.get("method") == "$/progress" and m["params"]["value"].get("kind") == "end"

    end = time.monotonic() + 300
    while time.monotonic() < end:
        progress = [m for m in s.messages if m.get("method") == "$/progress"][before:]
        if any(ended(m) for m in progress):
            value: dict[str, Any] = next(m for m in progress if ended(m))["params"]["value"]
            return value
        time.sleep(0.1)
    raise AssertionError("the reduction never ended")


def test_a_budget_spent_before_any_smaller_failing_model_does_not_end_ok(tmp_path: Path) -> None:
    ws = failing_demo(tmp_path)
    s = RawServer(cwd=ws)
    try:
        s.initialize(ws)
        uri = (ws / "trtls.toml").as_uri()
        spent = _end(s, uri, maxTrials=1)
        assert spent["outcome"] == "stopped" and spent["outcomeKind"] == "failed", spent
        found = _end(s, uri)
        assert found["outcome"] == "configuration" and found["outcomeKind"] == "ok", found
    finally:
        s.close()
