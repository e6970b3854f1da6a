"""The server's own life over real stdio: SIGTERM from a service manager, fast typing (the validation throttle), and
the end of a session (nothing sent or logged in a loop once stdout is closed)."""

from __future__ import annotations

import io
import json
import logging
import os
import shutil
import signal
from pathlib import Path

from pygls.io_ import StdoutWriter

from .raw_stdio import RawServer


def quickstart(tmp: Path, models: Path) -> Path:
    from tests.conftest import QUICKSTART

    ws = tmp / "ws"
    shutil.copytree(QUICKSTART, ws, ignore=shutil.ignore_patterns(".trtls", "build"))
    return ws


def open_doc(s: RawServer, path: Path, text: str | None = None) -> str:
    uri = path.as_uri()
    s.notify(
        "textDocument/didOpen",
        {"textDocument": {"uri": uri, "languageId": "toml", "version": 1, "text": text or path.read_text()}},
    )
    return uri


def test_sigterm_stops_the_build_writes_its_evidence_and_exits_143(tmp_path: Path, quickstart_models: Path) -> None:
    ws = quickstart(tmp_path, quickstart_models)
    s = RawServer(cwd=ws)
    try:
        s.initialize(ws)
        uri = open_doc(s, ws / "trtls.toml")
        res = s.request("workspace/executeCommand", {"command": "trtls.buildEngine",
                                                     "arguments": [{"uri": uri, "engine": "large"}]})  # fmt: skip
        build_id = res["result"]["buildId"]
        s.wait_for(lambda m: m.get("method") == "$/progress" and "›" in str(m["params"]["value"].get("message")))
        os.kill(s.proc.pid, signal.SIGTERM)
        assert s.proc.wait(120) == 143  # stdin stays open: the signal alone ends the server
    finally:
        s.close()
    run = ws / ".trtls" / "runs" / build_id
    summary = json.loads((run / "summary.json").read_text())
    assert summary["cancelSource"] == "service_shutdown"
    assert summary["outcome"] in ("cancelled", "forced"), summary["outcome"]  # forced only if the grace ran out
    assert not (run / "running.json").exists() and not (ws / "build" / "large.engine").exists()


def test_fast_typing_is_checked_less_often_than_it_changes_and_the_last_text_wins(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    s = RawServer(cwd=ws)
    try:
        s.initialize(ws)
        base = '[engines.solo]\nonnx = "model.onnx"\noutput = "build/solo.engine"\n'
        uri = open_doc(s, ws / "trtls.toml", base)
        s.wait_for(lambda m: m.get("method") == "textDocument/publishDiagnostics")
        before = len([m for m in s.messages if m.get("method") == "textDocument/publishDiagnostics"])
        for version in range(2, 32):  # 30 keystrokes in one burst; only the last makes a TRT102
            grace = -1 if version == 31 else version
            s.notify(
                "textDocument/didChange",
                {"textDocument": {"uri": uri, "version": version},
                 "contentChanges": [{"text": base + f"cancel_grace_s = {grace}\n"}]},
            )  # fmt: skip
        s.wait_for(
            lambda m: (
                m.get("method") == "textDocument/publishDiagnostics"
                and "TRT102" in {d["code"] for d in m["params"]["diagnostics"]}
            )
        )
        s.request("textDocument/hover", {"textDocument": {"uri": uri}, "position": {"line": 0, "character": 1}})
        publishes = [m for m in s.messages if m.get("method") == "textDocument/publishDiagnostics"][before:]
        assert 1 <= len(publishes) < 30, len(publishes)
        assert "TRT102" in {d["code"] for d in publishes[-1]["params"]["diagnostics"]}, "the last text is diagnosed"
    finally:
        s.close()


def test_after_stdout_closes_a_late_notification_is_dropped_not_a_traceback_storm() -> None:
    """The 18,721 tracebacks after `exit`: pygls closes stdout, a notification sent later failed, and pygls' error
    report resent through the same closed stdout, recursing (~200 tracebacks per late notification)."""
    from trtls.lsp.language_server import TrtlsServer
    from trtls.lsp.wire_guard import ClosedSafeStdout

    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    root = logging.getLogger()
    keep = Keep(logging.INFO)
    root.addHandler(keep)
    try:
        server = TrtlsServer()
        stdout = ClosedSafeStdout(io.BytesIO())
        writer = StdoutWriter(stdout)  # type: ignore[arg-type]
        server.protocol.set_writer(writer)
        writer.close()  # what pygls' `exit` does
        for _ in range(10):
            server.protocol.notify("trtls/buildTree", {"buildId": "x"})
        server.report_server_error(ValueError("I/O operation on closed file."), Exception)
    finally:
        root.removeHandler(keep)
    assert stdout.dropped == 10
    assert not [r for r in records if r.exc_info], "no traceback"
    assert len(records) <= 2, [r.getMessage() for r in records]


def test_exit_in_the_middle_of_a_build_leaves_no_traceback(tmp_path: Path, quickstart_models: Path) -> None:
    ws = quickstart(tmp_path, quickstart_models)
    s = RawServer(cwd=ws)
    s.initialize(ws)
    uri = open_doc(s, ws / "trtls.toml")
    s.request(
        "workspace/executeCommand", {"command": "trtls.buildEngine", "arguments": [{"uri": uri, "engine": "large"}]}
    )
    s.wait_for(lambda m: m.get("method") == "$/progress" and "›" in str(m["params"]["value"].get("message")))
    s.notify("exit")  # no shutdown first: an editor window closed in a hurry
    s.wait(120)
    err = s.stderr.decode(errors="replace")
    assert "Traceback" not in err and "closed file" not in err, err[-3000:]
