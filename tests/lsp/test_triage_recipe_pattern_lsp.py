"""The editor's Reduce (`trtls.reduceEngine`) with the recipe's failure pattern, over the real server on stdio: a
TopK over TensorRT's k limit fails with an API usage error nothing classifies; with `[engines.m.triage] fail_regex`
the reduction needs no failRegex argument and reduces to the TopK (the record says the pattern came from the
recipe); an explicit failRegex wins over it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.triage.test_reduce_cases import _chain, _engine

from .raw_stdio import RawServer

TOPK = r"K exceeds the maximum value allowed \(3840\)"


def _reduce(s: RawServer, ws: Path, arg: dict[str, Any]) -> dict[str, Any]:
    uri = (ws / "trtls.toml").as_uri()
    reply = s.request("workspace/executeCommand", {"command": "trtls.reduceEngine", "arguments": [{"uri": uri, **arg}]})
    rid = reply["result"]["reductionId"]
    result = ws / ".trtls" / "reduce" / rid / "result.json"

    def ended(_m: dict[str, Any]) -> bool:
        listed = [m for m in s.messages if m.get("method") == "textDocument/publishDiagnostics"]
        return result.is_file() and any(
            d.get("code") == "TRT980" and rid in json.dumps(d.get("data")) for m in listed
            for d in m["params"]["diagnostics"]
        )  # fmt: skip

    s.wait_for(ended, timeout=600)
    return json.loads(result.read_text())


def test_the_editors_reduce_uses_the_recipes_pattern_and_an_explicit_one_wins(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    ops = [("Relu", "relu"), ("Sigmoid", "sig"), ("TopK", "topk"), ("Neg", "neg")]
    _chain(ws / "m.onnx", ops, ["N", 8192], ["N", 5000])
    (ws / "trtls.toml").write_text(
        _engine("m", "m.onnx", "[N, 8192]", smem=False) + f"[engines.m.triage]\nfail_regex = '{TOPK}'\n"
    )
    s = RawServer(cwd=ws)
    try:
        s.initialize(ws)
        record = _reduce(s, ws, {"engine": "m"})
        assert record["failRegexFrom"] == "recipe" and record["failRegex"] == [TOPK], record["causeText"]
        assert record["outcome"] == "reduced" and record["minimal"]["nodeNames"] == ["topk"]
        record = _reduce(s, ws, {"engine": "m", "failRegex": ["a message TensorRT never writes"]})
        assert record["failRegexFrom"] == "argument" and record["outcome"] == "not_reproduced"
    finally:
        s.close()
