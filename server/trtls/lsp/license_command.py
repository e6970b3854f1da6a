"""`trtls.allowLicense {uri, route, license}`: add a licence to a route's allow list (TRT507's quick fix) — only after
the user confirms, since it widens what ships; the edit goes to the editor (workspace/applyEdit), never to disk."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcInvalidParams

from trtls.core.wire import AllowLicenseReply

if TYPE_CHECKING:
    from trtls.lsp.command_args import AllowLicenseArgs
    from trtls.lsp.language_server import TrtlsServer


async def allow_license_command(ls: TrtlsServer, a: AllowLicenseArgs) -> AllowLicenseReply:
    """Ask, then send the edit of `allowed_licenses` (added under the route's header when the route has none)."""
    loaded = await ls.recipe_async(a.uri)
    route = (loaded.data.get("routes") or {}).get(a.route)
    if route is None:
        raise JsonRpcInvalidParams(f"no route '{a.route}' in {loaded.path.name}")
    allow = lsp.MessageActionItem(title="Allow")
    answer = await ls.window_show_message_request_async(
        lsp.ShowMessageRequestParams(
            type=lsp.MessageType.Warning,
            message=f"Allow licence '{a.license}' for route '{a.route}' (intended use: "
            f"{route.get('intended_use', 'not stated')})?",
            actions=[allow, lsp.MessageActionItem(title="Cancel")],
        )
    )
    if answer is None or answer.title != allow.title:
        return AllowLicenseReply(applied=False)
    current = [str(x) for x in route.get("allowed_licenses", [])]
    text = "[" + ", ".join(f'"{x}"' for x in [*current, a.license]) + "]"
    span = loaded.source_map.span(("routes", a.route, "allowed_licenses"))
    if span is not None and span.value is not None:
        r = span.value
        edit = lsp.TextEdit(
            lsp.Range(lsp.Position(r.start_line, r.start_col), lsp.Position(r.end_line, r.end_col)), text
        )
    else:  # no allow list yet: add one under the route's header
        header = loaded.source_map.range(("routes", a.route))
        edit = lsp.TextEdit(
            lsp.Range(lsp.Position(header.start_line + 1, 0), lsp.Position(header.start_line + 1, 0)),
            f"allowed_licenses = {text}\n",
        )
    result = await ls.workspace_apply_edit_async(
        lsp.ApplyWorkspaceEditParams(edit=lsp.WorkspaceEdit(changes={a.uri: [edit]}), label="trtls: allow licence")
    )
    return AllowLicenseReply(applied=bool(result.applied))
