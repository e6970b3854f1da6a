"""builds.supervisor.retry is the one owner of the retry kinds and of which retry each advised policy points at (issue
18):
the LSP quick fixes and the command's argument model follow the table, not a copy of it."""

from __future__ import annotations

import typing

import pytest
from lsprotocol import types as lsp

from trtls.builds.supervisor import retry
from trtls.lsp.command_args import BuildEngineArgs
from trtls.lsp.editor import code_actions


def _retry_actions(policy: str) -> list[lsp.CodeAction]:
    diagnostic = lsp.Diagnostic(
        range=lsp.Range(lsp.Position(0, 0), lsp.Position(0, 1)),
        message="the build failed",
        code="TRT205",
        data={"engine": "demo", "retryPolicy": policy},
    )
    return code_actions("file:///r/trtls.toml", "[engines.demo]\n", [diagnostic])


def _preferred(actions: list[lsp.CodeAction]) -> list[str]:
    return [a.command.arguments[0]["retry"] for a in actions if a.is_preferred and a.command]


@pytest.mark.parametrize("policy", sorted(retry.RETRY_FOR_POLICY))
def test_each_advised_policy_prefers_the_tables_retry(policy: str) -> None:
    actions = _retry_actions(policy)
    assert [a.command.arguments[0]["retry"] for a in actions if a.command] == list(retry.RETRY_KINDS)
    assert [a.title for a in actions] == [retry.RETRY_TITLES[k] for k in retry.RETRY_KINDS]
    assert _preferred(actions) == [retry.RETRY_FOR_POLICY[policy]]


def test_the_quick_fixes_follow_a_changed_table(monkeypatch: pytest.MonkeyPatch) -> None:
    """A copy of the rule would keep the old answer: the table changed, the preferred fix changes with it."""
    monkeypatch.setitem(retry.RETRY_FOR_POLICY, "investigate", "cold")
    assert _preferred(_retry_actions("investigate")) == ["cold"]
    monkeypatch.delitem(retry.RETRY_FOR_POLICY, "retry_cold")
    assert _preferred(_retry_actions("retry_cold")) == []
    assert _preferred(_retry_actions("not_needed")) == []


def test_the_command_accepts_exactly_the_tables_kinds() -> None:
    annotation = BuildEngineArgs.model_fields["retry"].annotation
    kinds = [a for arg in typing.get_args(annotation) for a in typing.get_args(arg)]
    assert tuple(kinds) == retry.RETRY_KINDS
