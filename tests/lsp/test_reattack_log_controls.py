"""A command refused for a hostile argument is one line on the server's stderr (the editor's output channel, or a
terminal running `trtls serve`), with the control characters the argument carried written visibly: an id or a name
holding an ANSI/OSC escape, a bell, a NUL or a newline never reaches stderr raw, nor splits the line."""

from __future__ import annotations

from pathlib import Path

from .raw_stdio import RawServer

RECIPE = '[engines.solo]\nonnx = "model.onnx"\noutput = "build/solo.engine"\n'
HOSTILE = "\x1b[2J\x1b]0;owned\x07\x00\r\nFAKE: all builds passed\x9b31m"


def test_a_refused_argument_with_control_characters_is_one_escaped_line(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "trtls.toml").write_text(RECIPE)
    s = RawServer(cwd=ws)
    try:
        s.initialize(ws)
        uri = (ws / "trtls.toml").as_uri()
        for name, arg in (
            ("trtls.cancelBuild", {"buildId": HOSTILE}),
            ("trtls.showEvidence", {"buildId": HOSTILE}),
            ("trtls.lockRoute", {"uri": uri, "route": HOSTILE}),
        ):
            reply = s.request("workspace/executeCommand", {"command": name, "arguments": [arg]}, timeout=60)
            assert reply.get("error", {}).get("code") == -32602, reply
    finally:
        s.close()
    err = s.stderr.decode("utf-8", errors="replace")
    for raw in ("\x1b", "\x07", "\x00", "\r", "\x9b"):
        assert raw not in err, (raw, err[-3000:])
    assert "FAKE: all builds passed" in err, "the refusal is logged"
    assert not any(line.startswith("FAKE") for line in err.splitlines()), "one line per refusal, never split"
    assert err.count("\\x1b]0;owned\\x07") == 3, err[-3000:]
