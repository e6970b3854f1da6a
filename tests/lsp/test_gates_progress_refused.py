"""A client that refuses the gates' progress token still gets its gates run (issue 18: the gates start had its own
copy of the progress start, without the try/except of the build's, so runGates failed). Real server over stdio."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from .raw_stdio import RawServer

ROUTE = Path(__file__).resolve().parents[2] / "samples" / "route"


def test_run_gates_without_the_progress_the_client_refused(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    shutil.copytree(
        ROUTE,
        ws,
        ignore=shutil.ignore_patterns(".trtls", "build", "checkpoints", "inputs", "model.onnx", "trtls.lock.json"),
    )
    subprocess.run([sys.executable, str(ws / "make_checkpoint.py")], cwd=ws, check=True, capture_output=True)
    server = RawServer(cwd=ws, refuse_progress=True)
    try:
        server.initialize(ws)
        uri = (ws / "trtls.toml").as_uri()
        server.notify(
            "textDocument/didOpen",
            {"textDocument": {"uri": uri, "languageId": "toml", "version": 1, "text": (ws / "trtls.toml").read_text()}},
        )
        args = {"uri": uri, "route": "tiny", "gates": [1]}
        response = server.request("workspace/executeCommand", {"command": "trtls.runGates", "arguments": [args]})
        assert "result" in response, response  # not an error: the run went on without its toast
        assert response["result"]["route"] == "tiny" and response["result"]["decision"] is not None
        assert any(m.get("method") == "window/workDoneProgress/create" for m in server.messages)  # it was refused
        assert not any(m.get("method") == "$/progress" for m in server.messages)  # nothing sent on a refused token
    finally:
        server.close()
