"""Files the recipe's diagnostics and lenses rest on but the editor does not edit: the promotion ledger
(`trtls.promotions.jsonl`, written by `trtls route promote|canary|rollback`), a route's last gates record
(`.trtls/routes/<route>/summary.json`, written by `trtls gates`) and the recipe itself changed on disk. When the
client reports one changed (`workspace/didChangeWatchedFiles`; VS Code's client watches these globs, see
extension/src/client.ts), the recipe of that folder is checked again, so a promotion made in a terminal shows in
the editor without touching the recipe."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlparse

from lsprotocol import types as lsp

from trtls.core.write_policy import LEDGER_FILE as LEDGER

if TYPE_CHECKING:
    from trtls.lsp.language_server import TrtlsServer

WATCHED_GLOBS = ("**/trtls.toml", f"**/{LEDGER}", "**/.trtls/routes/*/summary.json")


def recipe_of(changed: Path) -> Path | None:
    """The recipe whose checks read `changed` (None: not one of ours)."""
    if changed.name == "trtls.toml":
        return changed
    if changed.name == LEDGER:
        return changed.parent / "trtls.toml"
    parts = changed.parts
    if changed.name == "summary.json" and len(parts) >= 4 and parts[-4:-2] == (".trtls", "routes"):
        return changed.parents[3] / "trtls.toml"
    return None


def register(server: TrtlsServer) -> None:
    @server.feature(lsp.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    def did_change_watched_files(ls: TrtlsServer, params: lsp.DidChangeWatchedFilesParams) -> None:
        known = {Path(unquote(urlparse(u).path)): u for u in ls.recipes}  # recipes this server has checked
        for uri in {known[r] for c in params.changes if (r := recipe_of(Path(unquote(urlparse(c.uri).path)))) in known}:
            ls.validate(uri, refresh_lenses=True)
