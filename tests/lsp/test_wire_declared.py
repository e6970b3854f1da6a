"""Everything the real server sends beyond LSP is what trtls.core.wire declares (extra="forbid"): every
`trtls/buildTree` of a real demo build, the end of its progress, and the reply of each command run here. A field
the server sends that the protocol does not declare (or a declared one it leaves out) fails this test."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pytest_lsp import LanguageClient

from trtls.core import wire

from .lsp_helpers import execute, open_recipe, plain, raw_progress_ends, until


async def test_notifications_and_replies_are_the_declared_models(client: LanguageClient, workspace: Path) -> None:
    trees: list[dict[str, Any]] = []
    client.feature("trtls/buildTree")(lambda params: trees.append(plain(params)))
    ends = raw_progress_ends(client)
    uri = open_recipe(client, workspace)

    replies: dict[str, Any] = {"trtls.listTargets": await execute(client, "trtls.listTargets", {"uri": uri})}
    started = await execute(client, "trtls.buildEngine", {"uri": uri, "engine": "demo"})
    replies["trtls.buildEngine"] = started
    build_id = started["buildId"]
    await until(lambda: any(t.get("buildId") == build_id and t.get("running") is False for t in trees))
    await until(lambda: len(ends) > 0)
    replies["trtls.listBuilds"] = await execute(client, "trtls.listBuilds", {})
    replies["trtls.cancelBuild"] = await execute(client, "trtls.cancelBuild", {"buildId": build_id})
    replies["trtls.showEvidence"] = await execute(client, "trtls.showEvidence", {"buildId": build_id})
    replies["trtls.buildReport"] = await execute(client, "trtls.buildReport", {"buildId": build_id})
    replies["trtls.printDebugInformation"] = await execute(client, "trtls.printDebugInformation", {})

    assert trees, "the build sent its tree"
    for t in trees:
        model = wire.MatrixTree if t.get("kind") == "matrix" else wire.BuildTree
        model.model_validate(t)  # raises on a field the protocol does not declare, or one it lacks
    final = wire.BuildTree.model_validate(trees[-1])
    assert final.outcome == "built" and final.description.startswith("built · ") and final.phases
    assert all(p.detail for p in final.phases)
    for value in ends.values():
        wire.ProgressEnd.model_validate(value)
    for command, reply in replies.items():
        wire.COMMAND_REPLIES[command].model_validate(plain(reply))
    assert replies["trtls.cancelBuild"]["accepted"] is False, "an ended build cannot be cancelled"
