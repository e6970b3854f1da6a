"""Diagnostics quote names a recipe carries — an engine's, an unknown key's, a model file's — and the editor shows them
in its Problems panel and hovers: a right-to-left override there reorders the text a person reads, an escape or a
newline forges what it says. Over a real language server on stdio, every diagnostic's message carries them written
visibly (`\\x1b`, `\\u202e`), as the terminal does: one rule, in `core.findings`."""

from __future__ import annotations

import re
from pathlib import Path

from .raw_stdio import RawServer

HOSTILE = "\\u001b]0;PWN\\u0007\\u001b[31m\\u202e\\n"  # TOML escapes: OSC title, SGR, a bidi override, a newline
CONTROL = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
TEXTS = {  # each recipe draws one diagnostic that quotes a hostile name
    "TRT101": f'[engines.demo]\nonnx = "m.onnx"\noutput = "build/x.engine"\n"bad{HOSTILE}key" = 1\n',
    "TRT108": f'[engines."de{HOSTILE}mo"]\nonnx = "m.onnx"\noutput = "build/x.engine"\n',
    "TRT104": f'[engines.demo]\nonnx = "m{HOSTILE}.onnx"\noutput = "build/x.engine"\n',
}


def test_every_diagnostic_message_is_free_of_control_characters(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "trtls.toml").write_text(TEXTS["TRT101"])
    uri = (ws / "trtls.toml").as_uri()
    s = RawServer(cwd=ws)
    said: dict[str, list[str]] = {}
    try:
        s.initialize(ws)
        for version, (code, text) in enumerate(TEXTS.items(), 1):
            if version == 1:
                document = {"uri": uri, "languageId": "toml", "version": 1, "text": text}
                s.notify("textDocument/didOpen", {"textDocument": document})
            else:
                s.notify(
                    "textDocument/didChange",
                    {"textDocument": {"uri": uri, "version": version}, "contentChanges": [{"text": text}]},
                )
            published = s.wait_for(
                lambda m, code=code: (
                    m.get("method") == "textDocument/publishDiagnostics"
                    and m["params"]["uri"] == uri
                    and any(d.get("code") == code for d in m["params"]["diagnostics"])
                )
            )
            said[code] = [d["message"] for d in published["params"]["diagnostics"]]
    finally:
        s.close()
    for code, messages in said.items():
        for message in messages:
            assert CONTROL.search(message) is None, (code, message)
        assert any("\\x1b]0;PWN\\x07" in m and "\\u202e\\x0a" in m for m in messages), (code, messages)
