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
    from trtls.core.findings import Finding
    from trtls.core.recipe import LoadedRecipe
    from trtls.lsp.command_args import RollbackEngineArgs
    from trtls.lsp.language_server import TrtlsServer


async def rollback_engine(ls: TrtlsServer, args: RollbackEngineArgs) -> RollbackEngineReply:
    """The rollback acts on the recipe as saved: its pin holds the saved recipe's engine key, which the terminal and
    CI read too (a pin keyed on unsaved text is lifted by the next `trtls build`). It writes no recipe, so nothing
    typed is lost; with unsaved changes open, every answer says the saved file was used (lsp/documents.unsaved_note).
    A failure is located on the engine's table of that file, and a recipe with errors on each error's own key
    (`refusal`), as the terminal names the recipe."""
    from trtls.app.results import Refused
    from trtls.app.rollback import RollbackFailed, request_rollback
    from trtls.lsp.build_commands import finish_restored, refused_request
    from trtls.lsp.documents import unsaved_note

    loaded, unsaved = await ls.saved_recipe_async(args.uri)
    note = f" — {unsaved_note(loaded.path, 'the rollback used')}" if unsaved else ""
    asked = await asyncio.to_thread(request_rollback, loaded, args.engine, args.to, "the editor (trtls.rollbackEngine)")
    if isinstance(asked, Refused) and asked.because == "bad_request":  # the terminal's code first: TRT107
        refused = refused_request(asked)
        raise JsonRpcInvalidParams(f"{refused.message}{note}", data=refused.data)
    if isinstance(asked, (Refused, RollbackFailed)):
        raise refusal(loaded, asked.findings if isinstance(asked, Refused) else [asked.finding], note)
    summary = asked.summary
    finish_restored(ls, args.uri, summary, loaded.path)  # a finished row, its evidence, lens and diagnostics
    return RollbackEngineReply(
        buildId=str(summary.buildId),
        engine=args.engine,
        status="rolled_back",
        message=f"{summary.message}{note}",
        rolledBackTo=summary.rolledBackTo or {},
    )


def refusal(loaded: LoadedRecipe, findings: list[Finding], note: str = "") -> JsonRpcInvalidParams:
    """A rollback refused for what the saved recipe says — its errors (each on its own key), nothing to roll back to
    or an engine that cannot be restored (TRT338 on `[engines.NAME]`) — as invalid params: every finding
    `file:line:col: CODE message` (`build_commands.located`, `LoadedRecipe.location`: the place the terminal prints),
    in file order (as the terminal prints them), joined by `; ` in the message, then `note` (unsaved changes);
    `data`: the first code and the lines."""
    from trtls.lsp.build_commands import located

    ordered = loaded.in_file_order(findings)
    said = located(loaded, ordered)
    return JsonRpcInvalidParams(f"{'; '.join(said)}{note}", data={"code": ordered[0].code, "errors": said})


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
