"""Files the recipe's diagnostics and lenses rest on but the editor does not edit: the promotion ledger
(`trtls.promotions.jsonl`, written by `trtls route promote|canary|rollback`), a route's last gates record
(`.trtls/routes/<route>/summary.json`, written by `trtls gates`), the recipe itself changed on disk, and the ONNX
models its engines name (with their external data: `*.onnx.data`, `*.onnx_data` in a model's folder). When the
client reports one changed (`workspace/didChangeWatchedFiles`; VS Code's client watches these globs, see
extension/src/client.ts), the recipe of that folder — for a model, every checked recipe whose engines read it — is
checked again, so a promotion made in a terminal shows in the editor without touching the recipe, and a model
rewritten in place is asked about again (capability as you type, lsp/capability_diagnostics.py: its cache is keyed by
the model's sha256, so an unchanged model costs no question)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlparse

from lsprotocol import types as lsp

from trtls.core.write_policy import LEDGER_FILE as LEDGER

if TYPE_CHECKING:
    from trtls.core.recipe import LoadedRecipe
    from trtls.lsp.language_server import TrtlsServer

MODEL_GLOBS = ("**/*.onnx", "**/*.onnx.data", "**/*.onnx_data")
WATCHED_GLOBS = ("**/trtls.toml", f"**/{LEDGER}", "**/.trtls/routes/*/summary.json", *MODEL_GLOBS)
EXTERNAL_DATA_SUFFIXES = (".onnx.data", ".onnx_data")


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


def models_of(loaded: LoadedRecipe) -> set[Path]:
    """The ONNX files the recipe's engines name (as written, joined to the recipe's folder: a recipe with errors
    still names them, and a model written where a missing one was named is read again)."""
    engines = loaded.data.get("engines") if isinstance(loaded.data, dict) else None
    folder = Path(loaded.path).parent
    return {
        Path(os.path.normpath(folder / e["onnx"]))
        for e in (engines.values() if isinstance(engines, dict) else ())
        if isinstance(e, dict) and isinstance(e.get("onnx"), str) and e["onnx"]
    }


def reads_model(loaded: LoadedRecipe, changed: Path) -> bool:
    """Whether `changed` is one of the recipe's models, or external data beside one (in a model's folder)."""
    models = models_of(loaded)
    if changed.suffix == ".onnx":
        return changed in models
    return changed.name.endswith(EXTERNAL_DATA_SUFFIXES) and any(m.parent == changed.parent for m in models)


def register(server: TrtlsServer) -> None:
    @server.feature(lsp.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    def did_change_watched_files(ls: TrtlsServer, params: lsp.DidChangeWatchedFilesParams) -> None:
        known = {Path(unquote(urlparse(u).path)): u for u in ls.recipes}  # recipes this server has checked
        changed = [Path(os.path.normpath(unquote(urlparse(c.uri).path))) for c in params.changes]
        due = {known[r] for c in changed if (r := recipe_of(c)) in known}
        models = [c for c in changed if c.suffix == ".onnx" or c.name.endswith(EXTERNAL_DATA_SUFFIXES)]
        due |= {uri for uri, loaded in list(ls.recipes.items()) if any(reads_model(loaded, m) for m in models)}
        for uri in due:
            ls.validate(uri, refresh_lenses=True)
