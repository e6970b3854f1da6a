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
    from trtls.checkpoint.lock import LockError, lock_route

    loaded = await ls.recipe_async(args.uri)
    if loaded.recipe is None or args.route not in loaded.recipe.routes:
        from pygls.exceptions import JsonRpcInvalidParams

        first = next(iter(loaded.errors), None)  # a recipe that does not load says why (a `.trtls` link: TRT118)
        why = f": {loaded.location(first)}: {first.code} {first.message}" if loaded.recipe is None and first else ""
        raise JsonRpcInvalidParams(f"no valid route '{args.route}' in {loaded.path.name}{why}")
    yes = lsp.MessageActionItem(title="Lock these files")
    answer = await ls.window_show_message_request_async(
        lsp.ShowMessageRequestParams(
            type=lsp.MessageType.Warning,
            message=f"Record the checkpoint files of route '{args.route}' as they are now in trtls.lock.json "
            "(only after reviewing them)?",
            actions=[yes, lsp.MessageActionItem(title="Cancel")],
        )
    )
    if answer is None or answer.title != yes.title:
        return LockRouteReply(route=args.route, locked=False, status="not_confirmed")
    try:
        entry = await asyncio.to_thread(lock_route, loaded, args.route)
    except LockError as exc:
        ls.window_show_message(lsp.ShowMessageParams(type=lsp.MessageType.Error, message=f"not locked: {exc}"))
        return LockRouteReply(route=args.route, locked=False, status="refused", reason=str(exc))
    commit = entry["checkpoint"]["commit"]
    return LockRouteReply(route=args.route, locked=True, files=len(entry["files"]), commit=commit)
