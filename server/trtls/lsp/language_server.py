"""The trtls language server object: its state (recipes, the registry of runs, diagnostics), the lazily created build
supervisor and settings, and recipe validation (in a worker thread, with a throttle).
The LSP handlers that drive it are in lsp/server.py."""

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
from trtls.lsp.client_token import CommandProtocol

if TYPE_CHECKING:  # none of these is imported before `initialize` is answered (tests/test_startup_imports.py)
    from pygls.server import ServerErrors

    from trtls.builds.supervisor.runs import RunRegistry
    from trtls.builds.supervisor.supervisor import Supervisor
    from trtls.core.recipe import LoadedRecipe
    from trtls.lsp.capability_diagnostics import CapabilityWatch
    from trtls.lsp.diagnostics import DiagnosticStore
    from trtls.lsp.settings import InitOptions


# Only pygls, lsprotocol and the standard library are imported before `initialize` is answered:
# the build core, the recipe models and pydantic (≈ 0.2 s together) load on first use, and a
# background thread warms them up right after `initialized` (see `warm_up`).
def warm_up() -> None:
    """Import what the first request will need (plain imports: the import graph stays visible to tools)."""
    import trtls.builds.supervisor.orphans
    import trtls.builds.supervisor.outcome_findings
    import trtls.builds.supervisor.supervisor
    import trtls.core.recipe
    import trtls.lsp.build_commands
    import trtls.lsp.command_args
    import trtls.lsp.diagnostics
    import trtls.lsp.editor
    import trtls.lsp.settings
    import trtls.onnx_files.profile_checks  # noqa: F401


DEBOUNCE_S = 0.15
log = logging.getLogger("trtls")


class TrtlsServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__("trtls", __version__, protocol_cls=CommandProtocol)  # a command's workDoneToken reaches it
        self._supervisor: Supervisor | None = None
        self._store: DiagnosticStore | None = None
        self._capability: CapabilityWatch | None = None
        self._options: InitOptions | None = None
        self.raw_init_options: lsp.LSPAny = None  # the client's initializationOptions, parsed on first use
        self.recipes: dict[str, LoadedRecipe] = {}  # uri → its last checked result
        self._lenses_due: set[str] = set()  # uris whose lenses are refreshed after their next check
        self.last_build: dict[tuple[str, str], str] = {}  # (uri, engine) → last finished build id
        self._runs: RunRegistry | None = None
        self._debounce: dict[str, asyncio.TimerHandle] = {}
        self._validated_at: dict[str, float] = {}  # uri → time.monotonic() of its last check
        self._checking: set[str] = set()  # uris whose check is running in a worker thread
        self._recheck: set[str] = set()  # … and changed since it started
        self.checks_stopped = False  # after `shutdown` or `exit`: no document is checked or published any more
        self._probe: dict[str, Any] | None = None
        self.recovering: set[Path] = set()  # folders whose orphan recovery is running

    def report_server_error(self, error: Exception, source: ServerErrors) -> None:
        """Never a showMessage "Error in server" for what a client sent, never a send after stdout closed."""
        from trtls.lsp.wire_guard import report_server_error

        report_server_error(error, source)

    @property
    def supervisor_if_started(self) -> Supervisor | None:
        """The supervisor once something created it, else None: a shutdown with no build to stop imports no build
        core for it (~0.25 s of CPU before an editor's `exit`)."""
        return self._supervisor

    @property
    def supervisor(self) -> Supervisor:
        if self._supervisor is None:
            from trtls.builds.supervisor.supervisor import Supervisor

            self._supervisor = Supervisor()
        return self._supervisor

    @property
    def runs(self) -> RunRegistry:
        """Every build, matrix and gates run this server started (trtls.builds.supervisor.runs), bounded retention."""
        if self._runs is None:
            from trtls.builds.supervisor.runs import RunRegistry

            self._runs = RunRegistry(self.options.keep_finished_runs, on_evict=self._forget)
        return self._runs

    async def stop_triage_runs(self, bound_s: float = 8.0) -> None:
        """At shutdown: stop every running reduction and divergence search (their trials' builds are their own, not
        the supervisor's that `shutdown` stops) and wait, within `bound_s` (below wire_guard's exit bound), for each
        to write its record: a reduction the editor's exit ended keeps what it found, and `--resume` continues it."""
        if self._runs is None:
            return
        runs = [*self._runs.running("reduction"), *self._runs.running("divergence")]
        for run in runs:
            run.cancel("service_shutdown")
        end = time.monotonic() + bound_s
        while any(r.running for r in runs) and time.monotonic() < end:
            await asyncio.sleep(0.05)

    def stop_checks(self) -> None:
        """At `shutdown`, `exit` or SIGTERM: no document check starts or publishes from now on, and a trailing check
        a keystroke left due (`validate_later`) is dropped. A check still due when `exit` unwound the loop ran after
        asyncio had shut its thread pool down and logged "Executor shutdown has been called" with its traceback (a CI
        run under a CPU burner, 2026-12-07); and diagnostics after `shutdown` reach a client that asked for none."""
        self.checks_stopped = True
        for handle in self._debounce.values():
            handle.cancel()
        self._debounce.clear()

    async def stop_own_work(self) -> None:
        """At shutdown or SIGTERM, after the builds: the triage runs (each writes its record) and a capability
        question in flight (its child killed and reaped before the loop closes: left to the loop's end, its pipes were
        still connecting when it closed, and asyncio printed a traceback; lsp/capability_diagnostics.py)."""
        self.stop_checks()
        await self.stop_triage_runs()
        if self._capability is not None:
            await self._capability.aclose()

    def _forget(self, run_id: str) -> None:
        self.supervisor.builds.pop(run_id, None)
        for key in [k for k, v in self.last_build.items() if v == run_id]:
            del self.last_build[key]

    @property
    def capability(self) -> CapabilityWatch:
        """Capability as you type (lsp/capability_diagnostics.py)."""
        if self._capability is None:
            from trtls.lsp.capability_diagnostics import CapabilityWatch

            self._capability = CapabilityWatch()
        return self._capability

    @property
    def store(self) -> DiagnosticStore:
        if self._store is None:
            from trtls.lsp.diagnostics import DiagnosticStore

            self._store = DiagnosticStore()
        return self._store

    @property
    def options(self) -> InitOptions:
        """Typed settings from initializationOptions; invalid ones fall back to defaults with a warning."""
        if self._options is None:
            from trtls.lsp.settings import parse_init_options

            options, problem = parse_init_options(self.raw_init_options)
            if problem:
                log.warning(problem)
            self._options = options
        return self._options

    # -- recipes -------------------------------------------------------------------------------
    def folders(self) -> list[Path]:
        roots = [to_fs_path(f.uri) for f in self.workspace.folders.values()]
        roots.append(self.workspace.root_path)
        return [Path(r) for r in roots if r]

    def _source(self, uri: str) -> tuple[Path, str | None]:
        """The recipe's path and its open document's text (None: read it from disk), or InvalidParams when the
        uri is refused (lsp/documents.py). Runs on the loop: the text is a snapshot."""
        doc = self.workspace.text_documents.get(uri)
        return self.judge(uri), doc.source if doc is not None else None

    def judge(self, uri: str) -> Path:
        """The recipe `uri` names when the server may act on it (its real path inside a workspace folder's real
        path, or a file the client opened outside them: lsp/documents.judge); InvalidParams otherwise."""
        from trtls.lsp.documents import judge

        return judge(uri, uri in self.workspace.text_documents, self.folders())

    def recipe(self, uri: str) -> LoadedRecipe:
        """Check the recipe now, on this thread (small documents, tests); commands use `recipe_async`."""
        from trtls.lsp.documents import check_text

        loaded = check_text(*self._source(uri))
        self.recipes[uri] = loaded
        return loaded

    async def recipe_async(self, uri: str) -> LoadedRecipe:
        """Check the recipe in a worker thread: hover, completion and cancel are answered meanwhile."""
        from trtls.lsp.documents import check_text

        loaded = await asyncio.to_thread(check_text, *self._source(uri))
        self.recipes[uri] = loaded
        return loaded

    async def saved_recipe_async(self, uri: str) -> tuple[LoadedRecipe, bool]:
        """The recipe as saved on disk, checked in a worker thread, and whether the open document has unsaved
        changes (lsp/documents.check_saved): for a command whose writes outlive the editor (rollback, lockRoute).
        Kept as the uri's last check only when the open text is the saved one (diagnostics are placed on the text)."""
        from trtls.lsp.documents import check_saved

        loaded, unsaved = await asyncio.to_thread(check_saved, *self._source(uri))
        if not unsaved:
            self.recipes[uri] = loaded
        return loaded, unsaved

    def checked(self, uri: str) -> LoadedRecipe | None:
        """The last checked result for a hover or a lens; a small document not checked yet is checked now, a large
        one answers None until its check (in a thread) lands."""
        from trtls.lsp.documents import SYNC_CHECK_BYTES

        loaded = self.recipes.get(uri)
        if loaded is None:
            doc = self.workspace.text_documents.get(uri)
            if doc is not None and len(doc.source) <= SYNC_CHECK_BYTES:
                loaded = self.recipe(uri)
        return loaded

    def publish(self, uri: str) -> None:
        from trtls.core.tomlpos import SourceMap

        loaded = self.recipes.get(uri)
        source_map = loaded.source_map if loaded is not None else SourceMap()
        self.text_document_publish_diagnostics(
            lsp.PublishDiagnosticsParams(uri=uri, diagnostics=self.store.diagnostics(uri, source_map))
        )

    def validate(self, uri: str, refresh_lenses: bool = False) -> None:
        """Check the document in a worker thread and publish; one check per uri at a time, and a change during it
        gets one more check after it (on the text as it is then), so the last text is always the one diagnosed.
        `refresh_lenses`: ask the client for new lenses after the check (a file they rest on changed on disk)."""
        if self.checks_stopped:
            return
        if refresh_lenses:
            self._lenses_due.add(uri)
        self._validated_at[uri] = time.monotonic()
        if uri in self._checking:
            self._recheck.add(uri)
            return
        self._checking.add(uri)
        asyncio.get_running_loop().create_task(self._check_and_publish(uri), name=f"trtls-check-{uri}")

    async def _check_and_publish(self, uri: str) -> None:
        from pygls.exceptions import JsonRpcException

        from trtls.core.findings import Origin

        try:
            while True:
                self._recheck.discard(uri)
                first = uri not in self.recipes
                try:
                    loaded = await self.recipe_async(uri)
                except JsonRpcException as exc:  # a refused uri (not a regular file …): one line, no diagnostics
                    log.warning("trtls: not checked: %s", exc)
                    return
                self.store.set(uri, Origin.recipe, "", loaded.findings)
                from trtls.gates.lifecycle.notes import promotion_findings  # TRT950–952 on promoted routes

                # off the event loop: judging a promotion's validity probes the environment (nvidia-smi)
                self.store.set(uri, Origin.gates, "promotion", await asyncio.to_thread(promotion_findings, loaded))
                from trtls.builds.avoidance.freshness import (
                    freshness_findings,  # TRT336/337: will rebuild, stale output
                )

                self.store.set(uri, Origin.build, "freshness", await asyncio.to_thread(freshness_findings, loaded))
                if self.checks_stopped:  # the session ended while this check ran: nothing more is sent
                    return
                self.publish(uri)
                self.capability.schedule(self, uri, loaded)  # TRT130/131: TensorRT asked in a child, debounced
                if first or uri in self._lenses_due:
                    self._lenses_due.discard(uri)
                    self.refresh_lenses()  # a lens asked for before this check landed got none, or is stale
                if uri not in self._recheck:
                    return
        except Exception:
            if self.checks_stopped:  # the loop's thread pool may be gone: the session's end, not a bug of the check
                log.info("trtls: the check of %s ended with the session", uri)
            else:
                log.exception("trtls: checking %s failed", uri)
        finally:
            self._checking.discard(uri)

    def validate_later(self, uri: str) -> None:
        """Throttle, not a plain debounce: a keystroke after a quiet spell is checked at once (a check costs a few
        ms; the ONNX models' inputs come from a cache), while fast typing is checked at most once per DEBOUNCE_S,
        with a trailing check so the last text is always the one diagnosed."""
        if uri in self._debounce or self.checks_stopped:
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
