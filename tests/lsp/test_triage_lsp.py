"""The triage jobs in the editor, over the real server: a TRT206 build failure offers "Reduce the failing model";
the reduction runs as a stoppable progress with every trial a build, ends in a located TRT980 on the engine table
with "Open the minimal model" and "Build the minimal model", and the latter is a real build of that model."""

from __future__ import annotations

import asyncio
from pathlib import Path

from lsprotocol import types as lsp
from pytest_lsp import LanguageClient

from .lsp_helpers import command_of, execute, open_recipe, raw_progress_ends, until

SMEM = "[engines.demo.builder]\noptimization_level = 3\n"


def _diagnostics(client: LanguageClient, uri: str, code: str) -> list[lsp.Diagnostic]:
    return [d for d in client.diagnostics.get(uri, []) if d.code == code]


async def _actions(client: LanguageClient, uri: str, diagnostic: lsp.Diagnostic) -> dict[str, tuple[str, list]]:
    actions = await client.text_document_code_action_async(
        lsp.CodeActionParams(
            text_document=lsp.TextDocumentIdentifier(uri=uri),
            range=diagnostic.range,
            context=lsp.CodeActionContext(diagnostics=[diagnostic]),
        )
    )
    return {a.title: command_of(a) for a in actions or []}


async def test_reduce_from_a_tensorrt_failure_to_a_minimal_model_and_build_it(
    client: LanguageClient, workspace: Path
) -> None:
    recipe = workspace / "trtls.toml"
    recipe.write_text(
        recipe.read_text().replace(SMEM, SMEM + "memory_pool_limits = { tactic_shared_memory_kib = 32 }\n")
    )
    ends = raw_progress_ends(client)
    uri = open_recipe(client, workspace)
    started = await execute(client, "trtls.buildEngine", {"uri": uri, "engine": "demo"})
    await until(lambda: bool(_diagnostics(client, uri, "TRT206")))
    (failure,) = _diagnostics(client, uri, "TRT206")
    actions = await _actions(client, uri, failure)
    command, arguments = actions["Reduce the failing model"]
    assert command == "trtls.reduceEngine" and arguments == [{"uri": uri, "engine": "demo"}]

    reply = await execute(client, command, arguments[0])
    assert reply["status"] == "started" and reply["reductionId"].startswith("reduce-demo-")
    await until(lambda: bool(_diagnostics(client, uri, "TRT980")), timeout=600)
    (result,) = _diagnostics(client, uri, "TRT980")
    line = recipe.read_text().splitlines()[result.range.start.line]
    assert line.strip() == "[engines.demo]", "located on the engine table"
    assert "tactic_shared_memory_kib = 32" in result.message and "244 → 1 nodes" in result.message
    assert any("the settings are the cause" in e.get("message", "") for e in ends.values())
    listed = await execute(client, "trtls.listBuilds", {})
    trials = [b for b in listed["builds"] if b.get("buildId", "").startswith(reply["reductionId"] + ".t")]
    assert len(trials) >= 3, "every trial is a build the Builds view lists"
    assert started["buildId"] not in [t["buildId"] for t in trials]

    actions = await _actions(client, uri, result)
    assert "Open the minimal model" in actions, (result.data, actions)
    assert actions["Open the minimal model"][0] == "trtls.showDocument"
    assert actions["Open the minimal model"][1][0]["path"].endswith("minimal.onnx")
    command, arguments = actions["Build the minimal model"]
    built = await execute(client, command, arguments[0])
    for _ in range(1200):
        rows = (await execute(client, "trtls.listBuilds", {}))["builds"]
        if any(r["buildId"] == built["buildId"] and r["status"] not in ("starting", "running") for r in rows):
            break
        await asyncio.sleep(0.1)
    shown = await execute(client, "trtls.showEvidence", {"buildId": built["buildId"]})
    summary = shown["summary"]
    assert summary["outcome"] == "failed" and summary["failure"]["assertion"].startswith("CHECK_GE(smem_limit")
    assert not (workspace / "build" / "demo.engine").exists(), "the engine's own output is never written"
