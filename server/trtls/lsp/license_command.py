"""`trtls.allowLicense {uri, route, license}`: add a licence to a route's allow list (TRT507's quick fix) — only after
the user confirms, since it widens what ships; the edit goes to the editor (workspace/applyEdit), never to disk."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcInvalidParams

from trtls.core.toml_text import toml_string
from trtls.core.wire import AllowLicenseReply

if TYPE_CHECKING:
    from trtls.core.recipe import LoadedRecipe
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
    text = "[" + ", ".join(toml_string(x) for x in [*current, a.license]) + "]"
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
    refused = _not_this_edit(loaded, a.route, [*current, a.license], edit)
    if refused is not None:
        raise JsonRpcInvalidParams(f"{loaded.path.name}: route '{a.route}': {refused}; add the licence by hand")
    result = await ls.workspace_apply_edit_async(
        lsp.ApplyWorkspaceEditParams(edit=lsp.WorkspaceEdit(changes={a.uri: [edit]}), label="trtls: allow licence")
    )
    return AllowLicenseReply(applied=bool(result.applied))


def _not_this_edit(loaded: LoadedRecipe, route: str, wanted: list[str], edit: lsp.TextEdit) -> str | None:
    """Why `edit` would not do exactly what the person allowed, or None: the recipe it leaves is read back — its
    route's allow list must be `wanted` and nothing else in the recipe may change. A route written as an inline table
    got its list as a top-level key below it (the route's own list unchanged) and an entry with a quote became two
    licences; an edit is sent only when its result is the one asked for."""
    from trtls.core.recipe import load_recipe
    from trtls.core.tomlpos import apply_edits

    r = edit.range
    span = [r.start.line, r.start.character, r.end.line, r.end.character]
    after = load_recipe(loaded.path, apply_edits(loaded.text, [{"range": span, "newText": edit.new_text}]))

    def without_the_list(data: dict[str, Any]) -> tuple[dict[str, Any], object]:
        found = data.get("routes")
        routes: dict[str, Any] = found if isinstance(found, dict) else {}
        own = routes.get(route)
        table: dict[str, Any] = own if isinstance(own, dict) else {}
        rest = {k: v for k, v in table.items() if k != "allowed_licenses"}
        return {**data, "routes": {**routes, route: rest}}, table.get("allowed_licenses")

    left, got = without_the_list(after.data)
    if got != wanted:
        return f"the edit would leave allowed_licenses = {got!r}, not {wanted!r}"
    if left != without_the_list(loaded.data)[0]:
        return "the edit would change more of the recipe than the route's allow list"
    return None
