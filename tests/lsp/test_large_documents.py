"""Large documents and many stale records must not block the real server (issue 22 item 8), over stdio.

No wall clock: each test asserts the ORDER of what the server sends. A check or a recovery that ran on the event
loop would answer the hover after it; one in a worker thread answers the hover first."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from .raw_stdio import RawServer

RECIPE = '[engines.solo]\nonnx = "model.onnx"\noutput = "build/solo.engine"\n'


@pytest.fixture
def server(tmp_path: Path):
    ws = tmp_path / "ws"
    ws.mkdir()
    s = RawServer(cwd=ws)
    s.initialize(ws)
    yield s, ws
    s.close()


def open_doc(s: RawServer, uri: str, text: str) -> None:
    s.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "toml", "version": 1, "text": text}})


def index_of(s: RawServer, predicate: Any) -> int:
    s.wait_for(predicate)
    return next(i for i, m in enumerate(s.messages) if predicate(m))


def is_publish(uri: str) -> Any:
    return lambda m: m.get("method") == "textDocument/publishDiagnostics" and m["params"]["uri"] == uri


def test_a_huge_document_is_not_parsed_and_gets_one_located_error(server: tuple[RawServer, Path]) -> None:
    s, ws = server
    uri = (ws / "trtls.toml").as_uri()
    huge = RECIPE + "[engines.solo.builder]\nx = [" + "1, " * 1_700_000 + "1]\n"  # 5 MB
    open_doc(s, uri, huge)
    hover = s.request("textDocument/hover", {"textDocument": {"uri": uri}, "position": {"line": 1, "character": 2}})
    completion = s.request(
        "textDocument/completion", {"textDocument": {"uri": uri}, "position": {"line": 3, "character": 0}}
    )
    assert "result" in hover and "result" in completion
    (diag,) = s.wait_for(is_publish(uri))["params"]["diagnostics"]
    assert diag["code"] == "TRT125" and diag["range"]["start"]["line"] == 0 and "too large" in diag["message"]
    lenses = s.request("textDocument/codeLens", {"textDocument": {"uri": uri}})["result"]
    assert not lenses, "nothing is offered on a recipe that was not checked"
    built = s.request(
        "workspace/executeCommand", {"command": "trtls.buildEngine", "arguments": [{"uri": uri, "engine": "solo"}]}
    )
    assert built["result"]["status"] == "invalid_recipe" and "TRT125" in built["result"]["errors"][0]


def test_a_huge_file_on_disk_is_not_read_for_a_command(server: tuple[RawServer, Path]) -> None:
    s, ws = server
    (ws / "trtls.toml").write_text(RECIPE + "# " + "x" * 6_000_000 + "\n")
    uri = (ws / "trtls.toml").as_uri()
    res = s.request(
        "workspace/executeCommand", {"command": "trtls.buildEngine", "arguments": [{"uri": uri, "engine": "solo"}]}
    )
    assert res["result"]["status"] == "invalid_recipe" and "TRT125" in res["result"]["errors"][0]


def test_hover_is_answered_while_a_large_document_is_checked(server: tuple[RawServer, Path]) -> None:
    s, ws = server
    uri = (ws / "trtls.toml").as_uri()
    engines = "".join(f'[engines.e{i}]\nonnx = "m{i}.onnx"\noutput = "build/e{i}.engine"\n' for i in range(3000))
    assert 64 * 1024 < len(engines) < 256 * 1024  # checked in full, but not on the spot
    open_doc(s, uri, engines)
    hover = s.request("textDocument/hover", {"textDocument": {"uri": uri}, "position": {"line": 1, "character": 2}})
    answered = s.messages.index(hover)
    published = index_of(s, is_publish(uri))
    assert answered < published, "the hover did not wait for the check"
    diags = s.messages[published]["params"]["diagnostics"]
    assert len([d for d in diags if d["code"] == "TRT104"]) == 3000  # the check itself ran in full
    # a change during a check gets one more check, on the text as it is then: the last text is diagnosed
    s.notify(
        "textDocument/didChange",
        {"textDocument": {"uri": uri, "version": 2}, "contentChanges": [{"text": engines + "oops = 1\n"}]},
    )
    s.notify(
        "textDocument/didChange",
        {"textDocument": {"uri": uri, "version": 3}, "contentChanges": [{"text": RECIPE}]},
    )
    s.wait_for(lambda m: is_publish(uri)(m) and [d["code"] for d in m["params"]["diagnostics"]] == ["TRT104"])
    last = [m for m in s.messages if is_publish(uri)(m)][-1]
    assert [d["code"] for d in last["params"]["diagnostics"]] == ["TRT104"]


def test_300_stale_records_neither_delay_the_first_hover_nor_flood_the_popup(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "trtls.toml").write_text(RECIPE)
    dead = subprocess.Popen(["true"])
    dead.wait()
    for i in range(300):
        run = ws / ".trtls" / "runs" / f"solo-stale-{i:03d}"
        run.mkdir(parents=True)
        record = {"buildId": run.name, "engine": "solo", "output": str(ws / "build" / "solo.engine"),
                  "supervisorPid": dead.pid, "supervisorStart": "boot:1"}  # fmt: skip
        (run / "running.json").write_text(json.dumps(record))
    s = RawServer(cwd=ws)
    try:
        s.initialize(None)  # no folder: only the opened recipe's folder is recovered
        uri = (ws / "trtls.toml").as_uri()
        open_doc(s, uri, RECIPE)
        hover = s.request("textDocument/hover", {"textDocument": {"uri": uri}, "position": {"line": 1, "character": 2}})
        answered = s.messages.index(hover)
        shown = index_of(s, lambda m: m.get("method") == "window/showMessage")
        assert answered < shown, "the hover did not wait for the recovery"
        (message,) = s.shown_messages()
        assert message.startswith("trtls: 300 builds whose supervising process died") and "and 297 more" in message
        assert len(message) < 1200, len(message)
        assert not list(ws.glob(".trtls/runs/*/running.json")), "every record was recovered"
    finally:
        s.close()
