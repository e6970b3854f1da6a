"""The trtls language server object: its state (recipes, builds, relays, diagnostics), the lazily created build
supervisor and settings, and recipe validation with a throttle. The LSP handlers that drive it are in lsp/server.py."""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lsprotocol import types as lsp
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path

from trtls import __version__

if TYPE_CHECKING:
    from trtls.core.recipe import LoadedRecipe


# Only pygls, lsprotocol and the standard library are imported before `initialize` is answered:
# the build core, the recipe models and pydantic (≈ 0.2 s together) load on first use, and a
# background thread warms them up right after `initialized` (see `warm_up`).
def warm_up() -> None:
    """Import what the first request will need (plain imports: the import graph stays visible to tools)."""
    import trtls.builds.orphans
    import trtls.builds.outcome_findings
    import trtls.builds.supervisor
    import trtls.core.recipe
    import trtls.lsp.build_commands
    import trtls.lsp.command_args
    import trtls.lsp.diagnostics
    import trtls.lsp.editor
    import trtls.lsp.settings
    import trtls.models.profile_checks  # noqa: F401


DEBOUNCE_S = 0.15
log = logging.getLogger("trtls")


class TrtlsServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__("trtls", __version__)
        self._supervisor: Any = None
        self._store: Any = None
        self._options: Any = None
        self.raw_init_options: Any = None
        self.recipes: dict[str, LoadedRecipe] = {}
        self.build_uri: dict[str, str] = {}  # build id → recipe uri
        self.last_build: dict[tuple[str, str], str] = {}  # (uri, engine) → last finished build id
        self.relays: dict[str, Any] = {}  # BuildRelay or MatrixRelay
        self.matrices: dict[str, Any] = {}  # matrix id → trtls.builds.matrix.MatrixBuild
        self._debounce: dict[str, asyncio.TimerHandle] = {}
        self._validated_at: dict[str, float] = {}  # uri → time.monotonic() of its last check
        self._probe: dict[str, Any] | None = None
        self.recovered: list[dict[str, Any]] = []

    @property
    def supervisor(self) -> Any:
        if self._supervisor is None:
            from trtls.builds.supervisor import Supervisor

            self._supervisor = Supervisor()
        return self._supervisor

    @property
    def store(self) -> Any:
        if self._store is None:
            from trtls.lsp.diagnostics import DiagnosticStore

            self._store = DiagnosticStore()
        return self._store

    @property
    def options(self) -> Any:
        """Typed settings from initializationOptions; invalid ones fall back to defaults with a warning."""
        if self._options is None:
            from trtls.lsp.settings import parse_init_options

            self._options, problem = parse_init_options(self.raw_init_options)
            if problem:
                log.warning(problem)
        return self._options

    # -- recipes -------------------------------------------------------------------------------
    def recipe(self, uri: str) -> LoadedRecipe:
        from trtls.models.profile_checks import check_recipe  # the recipe and its ONNX models' inputs

        doc = self.workspace.text_documents.get(uri)
        path = Path(to_fs_path(uri) or uri)
        loaded = check_recipe(path, doc.source if doc is not None else None)
        self.recipes[uri] = loaded
        return loaded

    def publish(self, uri: str) -> None:
        loaded = self.recipes.get(uri) or self.recipe(uri)
        self.text_document_publish_diagnostics(
            lsp.PublishDiagnosticsParams(uri=uri, diagnostics=self.store.diagnostics(uri, loaded.source_map))
        )

    def validate(self, uri: str) -> None:
        from trtls.core.findings import Origin

        self._validated_at[uri] = time.monotonic()
        loaded = self.recipe(uri)
        self.store.set(uri, Origin.recipe, "", loaded.findings)
        from trtls.gates.lifecycle.notes import promotion_findings  # TRT950–952 on promoted routes

        self.store.set(uri, Origin.gates, "promotion", promotion_findings(loaded))
        self.publish(uri)

    def validate_later(self, uri: str) -> None:
        """Throttle, not a plain debounce: a keystroke after a quiet spell is checked at once (a check costs a few
        ms; the ONNX models' inputs come from a cache), while fast typing is checked at most once per DEBOUNCE_S,
        with a trailing check so the last text is always the one diagnosed."""
        if uri in self._debounce:
            return  # a trailing check is due; it reads the document as it is then
        since = time.monotonic() - self._validated_at.get(uri, float("-inf"))
        if since >= DEBOUNCE_S:
            self.validate(uri)
            return

        def due() -> None:
            self._debounce.pop(uri, None)
            self.validate(uri)

        self._debounce[uri] = asyncio.get_running_loop().call_later(DEBOUNCE_S - since, due)

    def refresh_lenses(self) -> None:
        caps = self.client_capabilities.workspace
        if caps and caps.code_lens and caps.code_lens.refresh_support:
            future = self.workspace_code_lens_refresh(None)
            if future is not None:  # a client that refuses costs nothing but a stale lens
                future.add_done_callback(lambda f: f.exception() if not f.cancelled() else None)

    def probe_builder(self) -> dict[str, Any]:
        """The builder module the worker finds (asked once, in a child process: this one never imports TensorRT)."""
        if self._probe is None:
            from trtls.debug_info import probe_builder

            self._probe = probe_builder()
        return self._probe
