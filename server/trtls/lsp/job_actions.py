"""Quick actions that start a job rather than edit the recipe: triage (reduce, find the diverging layer, open or build
the minimal model) and the rollback of TRT205's `rollback` advice."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lsprotocol import types as lsp

if TYPE_CHECKING:
    from trtls.lsp.language_server import TrtlsServer


def job_actions(ls: TrtlsServer, uri: str, diagnostics: list[lsp.Diagnostic]) -> list[lsp.CodeAction]:
    from trtls.lsp.triage_command import triage_actions

    actions = triage_actions(uri, diagnostics)
    loaded = ls.recipes.get(uri)
    if loaded is not None and any(d.code == "TRT205" for d in diagnostics):
        from trtls.lsp.rollback_command import rollback_actions

        actions += rollback_actions(uri, loaded, diagnostics)
    return actions
