"""`trtls.lockRoute` refused on a recipe that does not load says why, located, over a real server on stdio."""

from __future__ import annotations

from pathlib import Path

from .raw_stdio import RawServer


def test_lock_route_on_a_recipe_that_does_not_load_says_why(tmp_path: Path) -> None:
    """`trtls.lockRoute` answered "no valid route 'r'" for a route that is there in a recipe that does not load (a
    `.trtls` link out, a syntax error): the refusal names the recipe's first error, located."""
    ws = tmp_path / "ws"
    ws.mkdir()
    text = '[routes.r]\nengine = "e"\n[engines.e\n'
    (ws / "trtls.toml").write_text(text)
    s = RawServer(cwd=ws)
    try:
        s.initialize(ws)
        uri = (ws / "trtls.toml").as_uri()
        reply = s.request(
            "workspace/executeCommand", {"command": "trtls.lockRoute", "arguments": [{"uri": uri, "route": "r"}]}
        )
    finally:
        s.close()
    message = reply.get("error", {}).get("message", "")
    assert reply.get("error", {}).get("code") == -32602 and "no valid route 'r'" in message, reply
    assert "TRT100" in message and "trtls.toml:3:" in message, message
