"""Editor helpers as plain functions (the LSP round trips are in test_editor_features.py)."""

from __future__ import annotations

from lsprotocol import types as lsp

from trtls.lsp.editor import code_actions


def _unknown(line: int, start: int, end: int, key: str) -> lsp.Diagnostic:
    rng = lsp.Range(lsp.Position(line, start), lsp.Position(line, end))
    return lsp.Diagnostic(range=rng, message="unknown key", code="TRT101", data={"key": key, "suggestion": None})


def test_remove_unknown_key_only_for_a_key_on_its_own_line() -> None:
    text = 'a = 1\ncolour = "blue"\ntiming_cache = { path = "c", mdoe = "read" }\n'
    own = code_actions("file:///x", text, [_unknown(1, 0, 6, "colour")])
    assert [a.title for a in own] == ["Remove unknown key 'colour'"]
    assert own[0].edit.changes["file:///x"][0].range == lsp.Range(lsp.Position(1, 0), lsp.Position(2, 0))
    inline = code_actions("file:///x", text, [_unknown(2, 29, 33, "mdoe")])
    assert inline == [], "removing the line would delete the valid keys of the inline table too"
