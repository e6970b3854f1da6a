"""`trtls.lockRoute {uri, route}`: record a route's checkpoint digests in trtls.lock.json — the quick fix of a
missing or drifted lock (TRT512). Locking says "I reviewed these files", so the user confirms first; the gates
themselves never write the lock."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from lsprotocol import types as lsp

from trtls.core.wire import LockRouteReply

if TYPE_CHECKING:
    from trtls.lsp.command_args import LockRouteArgs
    from trtls.lsp.language_server import TrtlsServer


async def lock_route_command(ls: TrtlsServer, args: LockRouteArgs) -> LockRouteReply:
    """The lock records the route as saved (`trtls gates` and CI read the saved recipe beside the lock): with unsaved
    changes open, the question asked first and a refusal say the saved file is used (lsp/documents.unsaved_note);
    the lock is not the recipe, so nothing typed is written over or lost."""
    from trtls.checkpoint.lock import LockError, lock_route
    from trtls.lsp.documents import unsaved_note

    loaded, unsaved = await ls.saved_recipe_async(args.uri)
    note = unsaved_note(loaded.path, "the lock is taken from") if unsaved else None
    then = f" — {note}" if note else ""
    if loaded.recipe is None or args.route not in loaded.recipe.routes:
        from pygls.exceptions import JsonRpcInvalidParams

        first = next(iter(loaded.errors), None)  # a recipe that does not load says why (a `.trtls` link: TRT118)
        why = f": {loaded.location(first)}: {first.code} {first.message}" if loaded.recipe is None and first else ""
        raise JsonRpcInvalidParams(f"no valid route '{args.route}' in {loaded.path.name}{why}{then}")
    yes = lsp.MessageActionItem(title="Lock these files")
    answer = await ls.window_show_message_request_async(
        lsp.ShowMessageRequestParams(
            type=lsp.MessageType.Warning,
            message=f"Record the checkpoint files of route '{args.route}' as they are now in trtls.lock.json "
            f"(only after reviewing them)?{f' {note}.' if note else ''}",
            actions=[yes, lsp.MessageActionItem(title="Cancel")],
        )
    )
    if answer is None or answer.title != yes.title:
        return LockRouteReply(route=args.route, locked=False, status="not_confirmed")
    try:
        entry = await asyncio.to_thread(lock_route, loaded, args.route)
    except LockError as exc:
        said = f"not locked: {exc}{then}"
        ls.window_show_message(lsp.ShowMessageParams(type=lsp.MessageType.Error, message=said))
        return LockRouteReply(route=args.route, locked=False, status="refused", reason=f"{exc}{then}")
    commit = entry["checkpoint"]["commit"]
    return LockRouteReply(route=args.route, locked=True, files=len(entry["files"]), commit=commit)
