"""Hostile URIs and frames sent to the real server over stdio (issue 22 items 4, 5, 9): nothing blocks it, nothing
makes it read without bound, write `.trtls/` where the user never pointed it, pop "Error in server", or answer with
a traceback. The server runs under a 4 GB address-space limit, so a regression that reads /dev/zero fails here
instead of waking the machine's OOM killer."""

from __future__ import annotations

import os
import resource
import shutil
import stat
from pathlib import Path
from typing import Any

import pytest

from .raw_stdio import RawServer

RECIPE = '[engines.solo]\nonnx = "model.onnx"\noutput = "build/solo.engine"\n'


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))


@pytest.fixture
def server(tmp_path: Path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "trtls.toml").write_text(RECIPE)
    s = RawServer(cwd=ws, preexec_fn=_limited)
    s.initialize(ws)
    yield s, ws
    s.close()


def command(s: RawServer, name: str, arg: Any, timeout: float = 30) -> dict[str, Any]:
    return s.request("workspace/executeCommand", {"command": name, "arguments": [arg]}, timeout=timeout)


def still_answers(s: RawServer, ws: Path) -> None:
    """The event loop is free: a command that reads a good recipe is answered."""
    ok = command(s, "trtls.listTargets", {"uri": (ws / "trtls.toml").as_uri()})
    assert ok.get("result", {}).get("engines") == ["solo"], ok


def refused(response: dict[str, Any], *words: str) -> str:
    assert "error" in response, response
    error = response["error"]
    assert error["code"] == -32602, error
    assert not error.get("data"), "no traceback in the response"
    assert all(w in error["message"] for w in words), error["message"]
    return str(error["message"])


def test_a_fifo_or_a_device_is_refused_before_reading(server: tuple[RawServer, Path]) -> None:
    s, ws = server
    fifo_dir, zero_dir = ws / "fifo", ws / "zero"
    fifo_dir.mkdir()
    zero_dir.mkdir()
    os.mkfifo(fifo_dir / "trtls.toml")  # opening it for reading would block until a writer comes
    cases = [(fifo_dir, "FIFO")]
    if os.geteuid() == 0:  # a device node inside the workspace: /dev/zero's, whose reading never ends
        os.mknod(zero_dir / "trtls.toml", stat.S_IFCHR | 0o644, os.makedev(1, 5))
        cases.append((zero_dir, "character device"))
    for folder, kind in cases:
        uri = (folder / "trtls.toml").as_uri()
        for name, arg in (
            ("trtls.buildEngine", {"uri": uri, "engine": "solo"}),
            ("trtls.listTargets", {"uri": uri}),
            ("trtls.runGates", {"uri": uri, "route": "r"}),
            ("trtls.buildMatrix", {"uri": uri}),
            ("trtls.lockRoute", {"uri": uri, "route": "r"}),
        ):
            refused(command(s, name, arg), "TRT104", "not a regular file", kind)
        assert not (folder / ".trtls").exists()
    still_answers(s, ws)
    # /dev/zero itself is outside the workspace, and so is a link to it inside: refused for that, before anything
    # is opened (the real path is judged, issue 27 item 14)
    refused(command(s, "trtls.buildEngine", {"uri": "file:///dev/zero", "engine": "x"}), "outside the workspace")
    linked = ws / "linked"
    linked.mkdir()
    (linked / "trtls.toml").symlink_to("/dev/zero")
    refused(command(s, "trtls.listTargets", {"uri": (linked / "trtls.toml").as_uri()}), "leads out", "/dev/zero")
    assert s.proc.poll() is None


def test_relative_nul_and_foreign_uris_are_clean_invalid_params(server: tuple[RawServer, Path]) -> None:
    s, ws = server
    # the server's cwd is the workspace: a relative "trtls.toml" would resolve to a real recipe there
    refused(command(s, "trtls.listTargets", {"uri": "trtls.toml"}), "not an absolute file: URI")
    refused(command(s, "trtls.buildEngine", {"uri": "trtls.toml", "engine": "solo"}), "not an absolute file: URI")
    message = refused(command(s, "trtls.listTargets", {"uri": ws.as_uri() + "/a%00b/trtls.toml"}), "NUL")
    assert "Traceback" not in message
    refused(command(s, "trtls.listTargets", {"uri": "https://example.com/trtls.toml"}), "not an absolute file")
    assert not (ws / "build").exists() and not (ws / ".trtls").exists(), "no build started in the cwd"
    assert b"Traceback" not in s.stderr


def test_a_recipe_outside_the_workspace_is_not_touched_unless_opened(
    server: tuple[RawServer, Path], tmp_path: Path
) -> None:
    s, ws = server
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "trtls.toml").write_text(RECIPE)
    uri = (elsewhere / "trtls.toml").as_uri()
    for name, arg in (
        ("trtls.buildEngine", {"uri": uri, "engine": "solo"}),
        ("trtls.runGates", {"uri": uri, "route": "r"}),
        ("trtls.listTargets", {"uri": uri}),
    ):
        refused(command(s, name, arg), "outside the workspace folders", "open it first")
    assert not (elsewhere / ".trtls").exists() and not (elsewhere / "build").exists()
    # the user opens it (a lone file): now it is a recipe folder they chose
    s.notify(
        "textDocument/didOpen",
        {"textDocument": {"uri": uri, "languageId": "toml", "version": 1, "text": RECIPE}},
    )
    assert command(s, "trtls.listTargets", {"uri": uri})["result"]["engines"] == ["solo"]


def test_malformed_frames_and_cancels_pop_nothing_and_log_one_line_each(server: tuple[RawServer, Path]) -> None:
    s, ws = server
    s.send_bytes(b"{not json")
    s.notify("$/cancelRequest", {"id": {"not": "an id"}})
    s.notify("window/workDoneProgress/cancel", {"token": {"not": "a token"}})
    s.notify("window/workDoneProgress/cancel", {"token": "trtls-build-unknown"})
    s.notify("textDocument/didOpen", {"textDocument": {"uri": "trtls.toml", "languageId": "toml", "version": 1,
                                                       "text": RECIPE}})  # fmt: skip
    refused(command(s, "trtls.cancelBuild", {"buildId": 3}), "buildId")
    refused(command(s, "trtls.showEvidence", {"buildId": "nope"}), "unknown")
    still_answers(s, ws)
    assert s.shown_messages() == [], "no window/showMessage 'Error in server'"
    err = s.stderr.decode(errors="replace")
    assert "Traceback" not in err, err[-3000:]
    # each problem is one line: the invalid params of cancelBuild included
    assert sum("Input should be a valid string" in line for line in err.splitlines()) == 1, err


def test_deep_nesting_replaces_a_stale_error_and_withdraws_the_lens(server: tuple[RawServer, Path]) -> None:
    s, ws = server
    shutil.copy(ws / "trtls.toml", ws / "copy.toml")
    uri = (ws / "trtls.toml").as_uri()
    bad = RECIPE + "cancel_grace_s = -1\n"  # TRT102
    s.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "toml", "version": 1, "text": bad}})
    first = s.wait_for(lambda m: m.get("method") == "textDocument/publishDiagnostics")
    assert "TRT102" in {d["code"] for d in first["params"]["diagnostics"]}
    deep = RECIPE + "builder = " + "{ a = " * 400 + "1" + " }" * 400 + "\n"
    s.notify(
        "textDocument/didChange",
        {"textDocument": {"uri": uri, "version": 2}, "contentChanges": [{"text": deep}]},
    )
    again = s.wait_for(lambda m: m.get("method") == "textDocument/publishDiagnostics" and m is not first)
    diags = again["params"]["diagnostics"]
    assert [d["code"] for d in diags if d["code"] == "TRT102"] == [], "the stale TRT102 is replaced"
    (nested,) = [d for d in diags if "nest" in d["message"]]
    assert nested["severity"] == 1 and "range" in nested
    lenses = s.request("textDocument/codeLens", {"textDocument": {"uri": uri}})["result"]
    assert not any("Build" in lens["command"]["title"] for lens in lenses or [])
    answer = command(s, "trtls.buildEngine", {"uri": uri, "engine": "solo"})
    assert "error" not in answer or answer["error"]["code"] != -32603, answer
    assert answer.get("result", {}).get("status") == "invalid_recipe", answer
    assert b"RecursionError" not in s.stderr
