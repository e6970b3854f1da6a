"""A click on Build Engine answers before the client answered `window/workDoneProgress/create` (issue 28 item 1: the
reply used to wait for that round trip). Over the real server: a client that holds its answer to the create request
until the buildEngine reply has arrived — the server that waited for the answer first would never reply — and the
build's progress still begins (once the answer came) and ends, with the build's own outcome."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest_lsp
from lsprotocol import types as lsp
from pytest_lsp import ClientServerConfig, LanguageClient

from tests.lsp.conftest import SERVER, accept_refresh, caps
from tests.lsp.lsp_helpers import execute, open_recipe, raw_progress_ends, until

NEVER = 300  # s: a bound on a wait that the old server never ended, not a measure of speed


@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER))
async def client(lsp_client: LanguageClient):
    accept_refresh(lsp_client)
    await lsp_client.initialize_session(lsp.InitializeParams(capabilities=caps()))
    yield
    await lsp_client.shutdown_session()


class SlowCreate:
    """The client's handler of window/workDoneProgress/create: it says it was asked, then holds its answer until
    `release` is set (the test sets it once the command's reply arrived)."""

    def __init__(self, client: LanguageClient) -> None:
        self.client = client
        self.asked = asyncio.Event()
        self.release = asyncio.Event()
        self.tokens: list[str] = []
        client.protocol.fm.features[lsp.WINDOW_WORK_DONE_PROGRESS_CREATE] = self.create  # pytest-lsp's, replaced

    async def create(self, params: lsp.WorkDoneProgressCreateParams) -> None:
        self.tokens.append(str(params.token))
        self.asked.set()
        await self.release.wait()
        self.client.progress_reports.setdefault(params.token, [])  # as pytest-lsp's own handler: the token exists


async def test_build_engine_replies_before_the_client_answers_the_progress_create(
    client: LanguageClient, workspace: Path
) -> None:
    slow = SlowCreate(client)
    ends = raw_progress_ends(client)
    uri = open_recipe(client, workspace)
    reply = asyncio.ensure_future(execute(client, "trtls.buildEngine", {"uri": uri, "engine": "demo"}))
    await asyncio.wait_for(slow.asked.wait(), NEVER)
    (token,) = slow.tokens
    done, _ = await asyncio.wait({reply}, timeout=NEVER)  # the create is unanswered all this time
    assert reply in done, "the reply waited for the client's answer to window/workDoneProgress/create"
    answered = reply.result()
    assert answered["status"] == "started" and answered["buildId"].startswith("demo-"), answered
    assert token not in client.progress_reports, "nothing was sent on the token before the client accepted it"

    slow.release.set()
    await until(lambda: token in ends, timeout=NEVER)
    reports = client.progress_reports[token]
    assert isinstance(reports[0], lsp.WorkDoneProgressBegin) and reports[0].title == "Building demo", reports[0]
    assert isinstance(reports[-1], lsp.WorkDoneProgressEnd)
    assert ends[token]["outcome"] == "built" and ends[token]["outcomeKind"] == "ok", ends[token]
    evidence = await execute(client, "trtls.showEvidence", {"buildId": answered["buildId"]})
    assert evidence["summary"]["outcome"] == "built"
