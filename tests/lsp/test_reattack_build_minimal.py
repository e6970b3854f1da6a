"""`trtls.buildMinimal {uri, reductionId, engine}` with the id of a reduction of another engine of the recipe: the
minimal model of one engine built with another engine's settings and profiles reproduces nothing — it is refused,
naming the engine the reduction was of (it once started that build, and answered as if it were the minimal model's)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from ..triage.reduce_models import failing_demo
from .raw_stdio import RawServer

OTHER = """
[engines.other]
onnx = "models/demo.onnx"
output = "build/other.engine"

[[engines.other.profiles]]
input = "input"
min = [1, 3, 32, 32]
opt = [2, 3, 32, 32]
max = [2, 3, 32, 32]
"""


def test_a_reduction_of_one_engine_is_not_built_as_another(tmp_path: Path) -> None:
    ws = failing_demo(tmp_path)
    (ws / "trtls.toml").write_text((ws / "trtls.toml").read_text() + OTHER)
    cmd = [sys.executable, "-m", "trtls", "reduce", str(ws), "--engine", "demo"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    (rid,) = [p.name for p in (ws / ".trtls" / "reduce").iterdir()]
    s = RawServer(cwd=ws)
    try:
        s.initialize(ws)
        uri = (ws / "trtls.toml").as_uri()
        arg = {"uri": uri, "reductionId": rid, "engine": "other"}
        reply = s.request("workspace/executeCommand", {"command": "trtls.buildMinimal", "arguments": [arg]})
        assert reply.get("error", {}).get("code") == -32602, reply
        assert "engine 'demo', not 'other'" in reply["error"]["message"], reply["error"]
        listed = s.request("workspace/executeCommand", {"command": "trtls.listBuilds", "arguments": [{}]})
        assert listed["result"]["builds"] == [], "nothing started"
        arg["engine"] = "demo"
        reply = s.request("workspace/executeCommand", {"command": "trtls.buildMinimal", "arguments": [arg]})
        assert reply.get("result", {}).get("status") == "started", reply
    finally:
        s.close()
    assert not (ws / "build").exists(), "no engine's own output written"
