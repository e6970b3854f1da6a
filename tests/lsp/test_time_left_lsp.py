"""Time left over real LSP (stdio), with real TensorRT-RTX builds: the first build of `demo` has no history to go by
(its progress messages end in "no estimate"); the second, with the first recorded, says "~… left, …–…"."""

from __future__ import annotations

from pathlib import Path

from lsprotocol import types as lsp
from pytest_lsp import LanguageClient

from .lsp_helpers import execute, open_recipe, until


def _demo_tokens(client: LanguageClient) -> list[str]:
    return [
        str(token)
        for token, reports in client.progress_reports.items()
        if reports and isinstance(reports[0], lsp.WorkDoneProgressBegin) and reports[0].title == "Building demo"
    ]


def _ended(client: LanguageClient, token: str) -> bool:
    return any(isinstance(r, lsp.WorkDoneProgressEnd) for r in client.progress_reports.get(token, []))


def _phase_messages(client: LanguageClient, token: str) -> list[str]:
    """The running build's progress lines (a phase path: `Building engine › …`)."""
    reports = client.progress_reports.get(token, [])
    return [r.message for r in reports if isinstance(r, lsp.WorkDoneProgressReport) and r.message and "›" in r.message]


async def test_the_second_build_says_its_time_left(client: LanguageClient, workspace: Path) -> None:
    uri = open_recipe(client, workspace)
    for count in (1, 2):
        await execute(client, "trtls.buildEngine", {"uri": uri, "engine": "demo"})
        await until(lambda n=count: len(_demo_tokens(client)) == n and _ended(client, _demo_tokens(client)[-1]))
    first, second = (_phase_messages(client, token) for token in _demo_tokens(client))
    assert first and all(m.endswith(" · no estimate") for m in first), first
    assert second and any(" left, " in m for m in second), second
