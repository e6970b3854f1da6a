"""The client's own progress token (`workDoneToken` of `workspace/executeCommand`, LSP 3.15) and the gates' progress
beside their reply (issue 28 item 1). Over the real server on stdio, with real TensorRT-RTX builds and gates runs:

- a client that sends a token with Build Engine gets begin and end on that token, and is never asked to create one
  (`window/workDoneProgress/create`: the round trip the client's token exists to save);
- its Cancel on that token stops the build (the Stop button), as on a token the server made;
- trtls.runGates answers before the client answered the create request (the gates used to wait for that answer
  before they started), and a gates run on the client's token is never asked for one either.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from lsprotocol import types as lsp
from pytest_lsp import LanguageClient

from tests.lsp.lsp_helpers import open_recipe, raw_progress_ends, until
from tests.lsp.test_progress_beside_reply import SlowCreate

NEVER = 300  # s: a bound on a wait that the old server never ended, not a measure of speed


def record_creates(client: LanguageClient) -> list[str]:
    """Every token the server asks the client to create (answered as pytest-lsp would)."""
    asked: list[str] = []

    def create(params: lsp.WorkDoneProgressCreateParams) -> None:
        asked.append(str(params.token))
        client.progress_reports.setdefault(params.token, [])

    client.protocol.fm.features[lsp.WINDOW_WORK_DONE_PROGRESS_CREATE] = create  # pytest-lsp's, replaced
    return asked


async def execute_with_token(client: LanguageClient, command: str, arg: dict[str, Any], token: str) -> Any:
    """The command sent as an editor that shows its own progress sends it: with a `workDoneToken` it made."""
    client.progress_reports.setdefault(token, [])  # the client knows its own token
    params = lsp.ExecuteCommandParams(command=command, arguments=[arg], work_done_token=token)
    return await client.workspace_execute_command_async(params)


def in_a_phase(reports: list[object]) -> bool:
    """A report names the running phase (`a › b`): the worker builds."""
    return any("›" in (getattr(r, "message", "") or "") for r in reports)


def ended(client: LanguageClient, token: str) -> bool:
    return any(isinstance(r, lsp.WorkDoneProgressEnd) for r in client.progress_reports.get(token, []))


async def test_build_progress_goes_on_the_clients_token_and_no_token_is_asked_for(
    client: LanguageClient, workspace: Path
) -> None:
    asked = record_creates(client)
    ends = raw_progress_ends(client)
    uri = open_recipe(client, workspace)
    token = "client-build-1"
    res = await execute_with_token(client, "trtls.buildEngine", {"uri": uri, "engine": "demo"}, token)
    assert res["status"] == "started", res
    await until(lambda: bool(ends), timeout=NEVER)  # the build's end, on whichever token it went
    assert asked == [], "the server asked for a token of its own although the client sent one"
    assert list(ends) == [token], "the build's progress went on another token"
    reports = client.progress_reports[token]
    assert isinstance(reports[0], lsp.WorkDoneProgressBegin) and reports[0].title == "Building demo", reports[0]
    assert reports[0].cancellable is True
    assert sum(isinstance(r, lsp.WorkDoneProgressBegin) for r in reports) == 1
    assert ends[token]["outcome"] == "built" and ends[token]["outcomeKind"] == "ok", ends[token]


async def test_cancel_on_the_clients_token_stops_the_build(client: LanguageClient, workspace: Path) -> None:
    asked = record_creates(client)
    ends = raw_progress_ends(client)
    uri = open_recipe(client, workspace)
    token = "client-build-stop"
    res = await execute_with_token(client, "trtls.buildEngine", {"uri": uri, "engine": "large"}, token)
    assert res["status"] == "started", res
    # a phase is running (the worker builds): the Stop lands in the build, not before it
    await until(lambda: any(in_a_phase(reports) for reports in client.progress_reports.values()))
    assert asked == [] and in_a_phase(client.progress_reports[token]), "the build reports on another token"
    client.window_work_done_progress_cancel(lsp.WorkDoneProgressCancelParams(token=token))
    await until(lambda: ended(client, token), timeout=NEVER)
    assert client.progress_reports[token][-1].message == "cancelled by ide_stop"
    assert (ends[token]["outcome"], ends[token]["outcomeKind"]) == ("cancelled", "cancelled"), ends[token]
    listed = await client.workspace_execute_command_async(
        lsp.ExecuteCommandParams(command="trtls.showEvidence", arguments=[{"buildId": res["buildId"]}])
    )
    assert listed["summary"]["outcome"] == "cancelled" and listed["summary"]["cancelSource"] == "ide_stop"
    assert not (workspace / "build" / "large.engine").exists()
    assert asked == []


async def test_run_gates_replies_before_the_client_answers_the_progress_create(
    client: LanguageClient, route_sample: Path
) -> None:
    slow = SlowCreate(client)
    ends = raw_progress_ends(client)
    uri = open_recipe(client, route_sample)
    args = {"uri": uri, "route": "license", "gates": [1]}
    reply = asyncio.ensure_future(
        client.workspace_execute_command_async(lsp.ExecuteCommandParams(command="trtls.runGates", arguments=[args]))
    )
    await asyncio.wait_for(slow.asked.wait(), NEVER)
    (token,) = slow.tokens
    done, _ = await asyncio.wait({reply}, timeout=NEVER)  # the create is unanswered all this time
    assert reply in done, "the gates waited for the client's answer to window/workDoneProgress/create"
    answered = reply.result()
    assert answered["decision"] == "reject", answered
    assert token not in client.progress_reports, "nothing was sent on the token before the client accepted it"

    slow.release.set()  # the run's progress goes out now, in order: begin, the last report, its end
    await until(lambda: token in ends, timeout=NEVER)
    reports = client.progress_reports[token]
    assert isinstance(reports[0], lsp.WorkDoneProgressBegin) and reports[0].title == "Gates license", reports[0]
    assert isinstance(reports[-1], lsp.WorkDoneProgressEnd) and reports[-1].message == answered["verdict"]["text"]
    assert (ends[token]["outcome"], ends[token]["outcomeKind"]) == ("reject", "refused"), ends[token]


async def test_run_gates_on_the_clients_token_asks_for_none(client: LanguageClient, route_sample: Path) -> None:
    asked = record_creates(client)
    ends = raw_progress_ends(client)
    uri = open_recipe(client, route_sample)
    token = "client-gates-1"
    res = await execute_with_token(client, "trtls.runGates", {"uri": uri, "route": "license", "gates": [1]}, token)
    assert res["decision"] == "reject", res
    reports = client.progress_reports[token]  # the end went out before the reply
    assert isinstance(reports[0], lsp.WorkDoneProgressBegin) and reports[0].title == "Gates license", reports[0]
    assert ends[token]["message"] == res["verdict"]["text"] and ends[token]["outcome"] == "reject", ends[token]
    assert asked == [] and list(ends) == [token]


async def test_a_token_the_client_sends_again_while_a_run_reports_on_it_is_not_taken_twice(
    client: LanguageClient, workspace: Path
) -> None:
    """A client that sends the same token with every request (one fixed string): the second build, started while the
    first still reports on it, gets a token of the server's, so Cancel on the client's token stops the first only."""
    asked = record_creates(client)
    ends = raw_progress_ends(client)
    uri = open_recipe(client, workspace)
    token = "1"
    first = await execute_with_token(client, "trtls.buildEngine", {"uri": uri, "engine": "large"}, token)
    await until(lambda: in_a_phase(client.progress_reports[token]))
    second = await execute_with_token(client, "trtls.buildEngine", {"uri": uri, "engine": "demo"}, token)
    assert first["status"] == second["status"] == "started", (first, second)
    await until(lambda: len(asked) == 1)
    (own,) = asked
    assert own.startswith("trtls-build-"), own
    client.window_work_done_progress_cancel(lsp.WorkDoneProgressCancelParams(token=token))
    await until(lambda: token in ends and own in ends, timeout=NEVER)
    assert ends[token]["outcome"] == "cancelled", ends[token]
    assert ends[own]["outcome"] == "built", ends[own]
    begins = [r.title for r in client.progress_reports[token] if isinstance(r, lsp.WorkDoneProgressBegin)]
    assert begins == ["Building large"], begins


async def test_a_reduction_reports_on_the_clients_token_and_no_token_is_asked_for(
    client: LanguageClient, workspace: Path
) -> None:
    """Reduce (trtls.reduceEngine) goes through the same progress as Build Engine: on the client's token, begun at
    once, ended with the reduction's outcome, and no create request."""
    smem = "[engines.demo.builder]\noptimization_level = 3\n"
    recipe = workspace / "trtls.toml"
    recipe.write_text(
        recipe.read_text().replace(smem, smem + "memory_pool_limits = { tactic_shared_memory_kib = 32 }\n")
    )
    asked = record_creates(client)
    ends = raw_progress_ends(client)
    uri = open_recipe(client, workspace)
    token = "client-reduce-1"
    reply = await execute_with_token(client, "trtls.reduceEngine", {"uri": uri, "engine": "demo"}, token)
    assert reply["status"] == "started" and reply["reductionId"].startswith("reduce-demo-"), reply
    await until(lambda: token in ends, timeout=NEVER)
    assert asked == [], "the server asked for a token of its own although the client sent one"
    assert list(ends) == [token], "the reduction's progress went on another token"
    reports = client.progress_reports[token]
    assert isinstance(reports[0], lsp.WorkDoneProgressBegin) and reports[0].cancellable is True, reports[0]
    assert ends[token]["outcome"] == "configuration", ends[token]  # the 32 KiB limit is named as the cause
