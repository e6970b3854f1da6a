"""`trtls.findDivergence {uri, engine, candidate}` over the real server on stdio (a workspace folder, as an editor
opens one): two given models — the divergence model and a copy whose LayerNormalization gamma differs in one
element — compared through ONNX Runtime; the result is TRT981 on the engine table naming `norm`, with no quick fix.
The candidate's path is judged like every uri: outside the workspace, through a symlink that leads out of it, or not
a regular file, it is refused with one line (-32602) before anything is read."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tests.triage.test_diverge_pair import _pair

from .raw_stdio import RawServer


@pytest.fixture
def server(tmp_path: Path):
    ws = tmp_path / "ws"
    ws.mkdir()
    candidate = _pair(ws)
    s = RawServer(cwd=ws)
    s.initialize(ws)
    yield s, ws, candidate
    s.close()


def _find(s: RawServer, arg: dict[str, Any]) -> dict[str, Any]:
    return s.request("workspace/executeCommand", {"command": "trtls.findDivergence", "arguments": [arg]}, timeout=60)


def _refused(response: dict[str, Any], *words: str) -> None:
    assert "error" in response, response
    assert response["error"]["code"] == -32602, response["error"]
    data = response["error"].get("data")  # a refusal of trtls.app.triage carries its code, as the terminal prints it
    assert not data or response["error"]["message"].startswith(f"{data['code']} "), response["error"]
    assert all(w in response["error"]["message"] for w in words), response["error"]["message"]


def _diagnostics(s: RawServer, uri: str, code: str) -> list[dict[str, Any]]:
    published = [
        m["params"] for m in s.messages if m.get("method") == "textDocument/publishDiagnostics"
        and m["params"]["uri"] == uri
    ]  # fmt: skip
    return [d for d in (published[-1]["diagnostics"] if published else []) if d.get("code") == code]


def test_two_given_models_diverge_first_at_the_changed_layer(server: tuple[RawServer, Path, Path]) -> None:
    s, ws, candidate = server
    uri = (ws / "trtls.toml").as_uri()
    reply = _find(s, {"uri": uri, "engine": "enc", "candidate": candidate.as_uri()})
    assert reply.get("result", {}).get("status") == "started", reply
    rid = reply["result"]["divergenceId"]
    s.wait_for(lambda m: bool(_diagnostics(s, uri, "TRT981")), timeout=300)
    (found,) = _diagnostics(s, uri, "TRT981")
    assert "first tensor out of tolerance in the candidate candidate.onnx" in found["message"], found["message"]
    assert "from node norm (LayerNormalization)" in found["message"]
    assert "exclude_nodes" not in found["message"] and "fix" not in found["data"]
    record = ws / ".trtls" / "reduce" / rid / "divergence.json"
    assert record.is_file() and '"mode": "models"' in record.read_text()
    listed = s.request("workspace/executeCommand", {"command": "trtls.listBuilds", "arguments": [{}]})
    (row,) = [b for b in listed["result"]["builds"] if b["buildId"] == rid]
    assert row["kind"] == "divergence" and row["status"] == "done"


def test_a_candidate_outside_the_workspace_or_not_a_file_is_refused(
    server: tuple[RawServer, Path, Path], tmp_path: Path
) -> None:
    s, ws, candidate = server
    uri = (ws / "trtls.toml").as_uri()
    outside = tmp_path / "outside.onnx"
    outside.write_bytes(candidate.read_bytes())
    _refused(
        _find(s, {"uri": uri, "engine": "enc", "candidate": outside.as_uri()}), "candidate:", "outside the workspace"
    )
    link = ws / "link.onnx"
    os.symlink(outside, link)
    _refused(_find(s, {"uri": uri, "engine": "enc", "candidate": link.as_uri()}), "candidate:", "symlink leads out")
    _refused(_find(s, {"uri": uri, "engine": "enc", "candidate": (ws / "models").as_uri()}), "not a regular file")
    _refused(_find(s, {"uri": uri, "engine": "enc", "candidate": "models/enc.onnx"}), "not an absolute file: URI")
    _refused(
        _find(s, {"uri": uri, "engine": "enc", "candidate": candidate.as_uri(), "reference": outside.as_uri()}),
        "reference:",
        "outside the workspace",
    )
    _refused(_find(s, {"uri": uri, "route": "r", "candidate": candidate.as_uri()}), "two given models")
    _refused(_find(s, {"uri": uri, "engine": "enc", "reference": candidate.as_uri()}), "reference needs candidate")
    assert not (ws / ".trtls" / "reduce").exists(), "nothing started"
