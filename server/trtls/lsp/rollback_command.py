"""`trtls.rollbackEngine {uri, engine, to?}`: the retry advice `rollback` as an action — restore a known-good engine
from the store to the output (trtls.builds.avoidance.rollback, the same as `trtls rollback`), and its quick fix on
TRT205
("Roll back to the engine of <when>")."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcInvalidParams

from trtls.core.wire import RollbackEngineReply

if TYPE_CHECKING:
    from trtls.core.recipe import LoadedRecipe
    from trtls.lsp.command_args import RollbackEngineArgs
    from trtls.lsp.language_server import TrtlsServer


async def rollback_engine(ls: TrtlsServer, args: RollbackEngineArgs) -> RollbackEngineReply:
    from trtls.app.results import Refused
    from trtls.app.rollback import RollbackFailed, request_rollback

    loaded = await ls.recipe_async(args.uri)
    asked = await asyncio.to_thread(request_rollback, loaded, args.engine, args.to, "the editor (trtls.rollbackEngine)")
    if isinstance(asked, Refused):  # the terminal's refusal, code first: the same mistake reads the same
        from trtls.lsp.build_commands import refused_request

        raise refused_request(asked)
    if isinstance(asked, RollbackFailed):
        raise JsonRpcInvalidParams(f"{asked.code} {asked.message}", data={"code": asked.code})
    from trtls.lsp.build_commands import finish_restored

    summary = asked.summary
    finish_restored(ls, args.uri, summary, loaded.path)  # a finished row, its evidence, lens and diagnostics
    return RollbackEngineReply(
        buildId=str(summary.buildId),
        engine=args.engine,
        status="rolled_back",
        message=str(summary.message),
        rolledBackTo=summary.rolledBackTo or {},
    )


def rollback_actions(uri: str, loaded: LoadedRecipe, diagnostics: list[lsp.Diagnostic]) -> list[lsp.CodeAction]:
    """On a TRT205 whose advice is `rollback`: one action per engine to go back to (the newest good one first)."""
    from trtls.builds.avoidance.rollback import RollbackError, rollback_target
    from trtls.core.display import ago

    out: list[lsp.CodeAction] = []
    for d in diagnostics:
        data = d.data if isinstance(d.data, dict) else {}
        engine = data.get("engine")
        if d.code != "TRT205" or data.get("retryPolicy") != "rollback" or not engine or loaded.recipe is None:
            continue
        if engine not in loaded.recipe.engines:
            continue
        try:
            target = rollback_target(loaded, engine, None)
        except (RollbackError, OSError, ValueError):
            continue  # nothing known-good to go back to: no action rather than one that fails
        title = f"Roll back to the engine built {ago(target.get('startedAt'))} (build {target.get('buildId')})"
        arg = {"uri": uri, "engine": engine, "to": target.get("buildId")}
        out.append(
            lsp.CodeAction(
                title=title,
                kind=lsp.CodeActionKind.QuickFix,
                diagnostics=[d],
                is_preferred=True,
                command=lsp.Command(title, "trtls.rollbackEngine", arguments=[arg]),
            )
        )
    return out
