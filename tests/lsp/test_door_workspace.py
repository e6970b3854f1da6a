"""The editor judges the REAL path of every URI (issue 27, items 14 and 20), over the real server's stdio.

Item 14: the workspace check was lexical, so a symlink inside the workspace to a recipe (or a folder) outside it
built there and wrote its `.trtls/` and engine there. Now the real path must be inside a workspace folder's real
path, for every command, for an opened document and for the recovery the server runs when it starts.

Item 20: `trtls.showDocument` called pygls 1's `show_document_async` (pygls 2 has `window_show_document_async`), so
it always answered -32603 AttributeError and "Open the minimal model" never worked; and its guard (`".trtls" in
parts`) let `.trtls/../../…/etc/passwd` through. Now it opens the file, and only a file whose real path is under a
`.trtls/` folder of the workspace.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

from .lsp_helpers import write_static_onnx
from .raw_stdio import RawServer

RECIPE = '[engines.solo]\nonnx = "model.onnx"\noutput = "build/solo.engine"\n'


def project(folder: Path) -> Path:
    """A recipe folder with a real model: a build there would succeed."""
    folder.mkdir(parents=True)
    write_static_onnx(folder / "model.onnx")
    (folder / "trtls.toml").write_text(RECIPE)
    return folder


def command(s: RawServer, name: str, arg: Any, timeout: float = 60) -> dict[str, Any]:
    return s.request("workspace/executeCommand", {"command": name, "arguments": [arg]}, timeout=timeout)


def refused(response: dict[str, Any], *words: str) -> str:
    assert "error" in response, response
    assert response["error"]["code"] == -32602, response["error"]
    assert all(w in response["error"]["message"] for w in words), response["error"]["message"]
    return str(response["error"]["message"])


def did_open(s: RawServer, uri: str) -> None:
    s.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "toml", "version": 1, "text": RECIPE}})


def test_a_symlink_in_the_workspace_to_a_recipe_outside_is_refused(tmp_path: Path) -> None:
    ws = project(tmp_path / "ws")
    elsewhere = project(tmp_path / "elsewhere")
    (ws / "linked").mkdir()
    (ws / "linked" / "trtls.toml").symlink_to(elsewhere / "trtls.toml")  # the recipe itself is the link
    (ws / "sub").symlink_to(elsewhere)  # a folder on the way is the link
    s = RawServer(cwd=ws)
    s.initialize(ws)
    try:
        for uri in ((ws / "linked" / "trtls.toml").as_uri(), (ws / "sub" / "trtls.toml").as_uri()):
            for name, arg in (
                ("trtls.buildEngine", {"uri": uri, "engine": "solo"}),
                ("trtls.buildMatrix", {"uri": uri}),
                ("trtls.listTargets", {"uri": uri}),
                ("trtls.runGates", {"uri": uri, "route": "r"}),
            ):
                refused(command(s, name, arg), "symlink leads out of the workspace", str(elsewhere))
            did_open(s, uri)  # opened from the workspace's tree: still a file that leads out of it
            refused(command(s, "trtls.buildEngine", {"uri": uri, "engine": "solo"}), "leads out")
        # the workspace's own recipe is served as before
        answer = command(s, "trtls.listTargets", {"uri": (ws / "trtls.toml").as_uri()})
        assert answer.get("result", {}).get("engines") == ["solo"], answer
    finally:
        s.close()
    assert not (elsewhere / ".trtls").exists() and not (elsewhere / "build").exists()
    assert b"Traceback" not in s.stderr


def _stale_record(folder: Path, build_id: str) -> Path:
    dead = subprocess.Popen(["true"])
    dead.wait()
    run = folder / ".trtls" / "runs" / build_id
    run.mkdir(parents=True)
    record = {"buildId": build_id, "engine": "solo", "output": str(folder / "build" / "solo.engine"),
              "supervisorPid": dead.pid, "supervisorStart": "boot:1"}  # fmt: skip
    (run / "running.json").write_text(json.dumps(record))
    return run


def test_recovery_at_start_stays_in_the_workspace(tmp_path: Path) -> None:
    """The server recovers interrupted builds in its workspace folders when it starts; a symlinked project folder
    that leads out of the workspace is not one of them (its records would make it write evidence there)."""
    ws = tmp_path / "ws"
    inside = project(ws / "inside")
    outside = project(tmp_path / "elsewhere")
    (ws / "linked").symlink_to(outside)
    theirs = _stale_record(outside, "solo-outside")
    ours = _stale_record(inside, "solo-inside")
    s = RawServer(cwd=ws)
    s.initialize(ws)
    try:
        s.wait_for(lambda m: m.get("method") == "window/showMessage" and "solo-inside" in m["params"]["message"])
    finally:
        s.close()  # the process has ended: every recovery it started has finished
    assert (ours / "summary.json").is_file() and not (ours / "running.json").exists()
    assert sorted(p.name for p in theirs.iterdir()) == ["running.json"], "nothing recovered outside"
    assert not any("solo-outside" in m for m in s.shown_messages())


def _show_document(s: RawServer, path: str, answer: bool = True) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Run trtls.showDocument, answering the client request it makes like an editor; (reply, requests seen)."""
    s._next_id += 1
    rid = s._next_id
    before = len(s.messages)
    s.send({"id": rid, "method": "workspace/executeCommand",
            "params": {"command": "trtls.showDocument", "arguments": [{"path": path}]}})  # fmt: skip

    def done_or_asked(m: dict[str, Any]) -> bool:
        return (m.get("id") == rid and "method" not in m) or (
            m.get("method") == "window/showDocument" and s.messages.index(m) >= before
        )

    first = s.wait_for(done_or_asked)
    asked = [first] if first.get("method") == "window/showDocument" else []
    if asked:
        s.send({"id": first["id"], "result": {"success": answer}})
        reply = s.wait_for(lambda m: m.get("id") == rid and "method" not in m)
    else:
        reply = first
    return reply, asked


def test_show_document_opens_a_file_under_the_workspace_trtls_and_nothing_else(tmp_path: Path) -> None:
    ws = project(tmp_path / "ws")
    minimal = ws / ".trtls" / "reduce" / "solo-r1" / "minimal.onnx"
    minimal.parent.mkdir(parents=True)
    write_static_onnx(minimal)
    (minimal.parent / "passwd.onnx").symlink_to("/etc/passwd")  # a link inside .trtls that leads out
    other = project(tmp_path / "other")
    (other / ".trtls").mkdir()
    (other / ".trtls" / "x.onnx").write_bytes(b"x")  # a .trtls folder, but not one of the workspace
    (ws / "away").mkdir()
    (ws / "away" / ".trtls").symlink_to(other / ".trtls")  # a .trtls in the workspace that is a link out
    s = RawServer(cwd=ws)
    s.initialize(ws)
    try:
        reply, asked = _show_document(s, str(minimal))
        assert reply.get("result") == {"shown": True}, reply
        (request,) = asked
        assert request["params"]["uri"] == minimal.resolve().as_uri() and request["params"]["external"] is True
        for hostile in (
            f"{ws}/.trtls/../../../../../../../../etc/passwd",
            str(minimal.parent / "passwd.onnx"),
            str(other / ".trtls" / "x.onnx"),
            str(ws / "away" / ".trtls" / "x.onnx"),
            ".trtls/reduce/solo-r1/minimal.onnx",  # relative: never resolved against the server's cwd
            str(ws / "model.onnx"),  # in the workspace, not under .trtls
        ):
            reply, asked = _show_document(s, hostile)
            assert not asked, (hostile, asked)
            refused(reply, "only a file trtls wrote under a .trtls/ folder of the workspace")
    finally:
        s.close()
    assert b"AttributeError" not in s.stderr and b"Traceback" not in s.stderr
    assert os.path.exists("/etc/passwd")
