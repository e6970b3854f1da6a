"""The trtls language server: a thin LSP layer over the build core and the gates.

Its documents are `trtls.toml` recipes. It never imports TensorRT (builds run in worker processes),
so initialize stays fast. Commands (workspace/executeCommand, one argument object each):

    trtls.buildEngine {uri, engine, retry?}  → {buildId, engine, status: "started" | "already_building"}
    trtls.buildMatrix {uri, engine?, cell?, matrix?} → {buildId, status, cells}  (a matrix or farm run)
    trtls.cancelBuild {buildId, source?}     → {buildId, accepted, status, stopped, message}  (any run; app/stop.py)
                                               (source: api, or ide_stop from an editor button)
    trtls.listBuilds {}                      → {builds: [...]}
    trtls.showEvidence {buildId}             → {buildId, path, summary}
    trtls.buildReport {buildId}              → {buildId, path, html}  (a build's or a matrix's `trtls report` page)
    trtls.listTargets {uri}                  → {engines, routes}
    trtls.runGates {uri, route, gates?}      → {runId, route, decision, checks, summaryPath}
    trtls.lockRoute {uri, route}             → {route, locked, ...}  (after the user confirms)
    trtls.allowLicense {uri, route, license} → {applied}  (after the user confirms)
    trtls.printDebugInformation {}           → {text, ...}   (and lsp/triage_commands_table.py's: reduce, rollback)

A second Build of an engine that is already building does not start another build: it answers
`already_building` with the running build's id (the progress and tree already show it). Every id-taking command
looks the id up in one registry of runs (trtls.builds.supervisor.runs); a `uri` goes through lsp/documents.py first.
"""

from __future__ import annotations

import asyncio
import gc
import inspect
import logging
import os
import signal
import sys
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path, PurePosixPath
from types import FrameType
from typing import TYPE_CHECKING, Any, TypeVar

from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcException, JsonRpcInternalError, JsonRpcInvalidParams

from trtls.lsp import wire_guard
from trtls.lsp.language_server import TrtlsServer, log, warm_up

if TYPE_CHECKING:  # the models load on the first command, never on initialize's path (no pydantic there)
    from pydantic import BaseModel

    from trtls.core import wire
    from trtls.lsp.command_args import (
        AllowLicenseArgs,
        BuildEngineArgs,
        BuildIdArgs,
        BuildMatrixArgs,
        CancelBuildArgs,
        EmptyArgs,
        LockRouteArgs,
        RunGatesArgs,
        UriArgs,
    )

# A command's handler: (the server, its argument model) → its reply model (trtls.core.wire), or a coroutine of one.
Handler = TypeVar("Handler", bound=Callable[..., "BaseModel | Awaitable[BaseModel]"])


def recover_builds(ls: TrtlsServer, folder: Path) -> None:
    from trtls.lsp.build_commands import recover

    asyncio.get_running_loop().create_task(recover(ls, folder))


server = TrtlsServer()


def command(name: str, args_model: str | None = None) -> Callable[[Handler], Handler]:
    """Register `handler(ls, args)` as the command `name`: the raw argument validated into its model (named by the
    handler's `args` annotation, or by `args_model` for a handler not imported yet: lsp/triage_commands_table.py; a
    wrong one is InvalidParams saying what was expected), and its reply model (trtls.core.wire) validated and sent by
    `reply`. A JSON-RPC error passes as raised; a recipe nested too deep is InvalidParams (TRT120); anything else is
    logged with its traceback and answered -32603 with one line. The handler is returned as written; pygls gets a
    wrapper whose argument is lsprotocol's `LSPAny` (pygls structures the argument by that annotation), and the
    models load on the first command, never on initialize's path (no pydantic there)."""

    def register(handler: Handler) -> Handler:
        model = args_model or declared_args(handler)

        async def run(ls: TrtlsServer, args: lsp.LSPAny = None) -> dict[str, Any]:
            from trtls.core.wire import reply
            from trtls.lsp.command_args import parse_args, typed_args

            try:
                answer = handler(ls, parse_args(typed_args(model), args))
                return reply(name, await answer if inspect.isawaitable(answer) else answer)
            except JsonRpcException:
                raise
            except RecursionError:
                raise JsonRpcInvalidParams("TRT120 recipe nested too deeply to check") from None
            except Exception as exc:
                log.exception("trtls: %s failed", name)
                raise JsonRpcInternalError(f"{name} failed: {type(exc).__name__}: {exc}") from None

        run.__name__ = run.__qualname__ = getattr(handler, "__name__", name)
        run.__doc__ = handler.__doc__
        server.command(name)(run)
        return handler

    return register


def declared_args(handler: Callable[..., object]) -> str:
    """The argument model a handler's `args` names, as written (`from __future__ import annotations`: a string)."""
    annotation = handler.__annotations__.get("args")
    if not isinstance(annotation, str) or not annotation.isidentifier():
        raise TypeError(f"{handler.__name__}: `args` must be annotated with one model of trtls.lsp.command_args")
    return annotation


def _doc_uri(ls: TrtlsServer, uri: str) -> Path | None:
    """A document notification's file, or None (one log line) when its uri is not one the server acts on (judged
    like every command's: its real path, lsp/documents.judge)."""
    try:
        return ls.judge(uri)
    except JsonRpcException as exc:
        log.warning("trtls: document ignored: %s", exc)
        return None


RECIPE_NAME = "trtls.toml"


def is_recipe(uri: str) -> bool:
    """Only files named trtls.toml are recipes. Clients that attach servers by file type (Neovim, Helix, Zed,
    eglot) send every TOML file; a Cargo.toml or pyproject.toml must get no diagnostics, lenses or hovers."""
    return PurePosixPath(uri.split("?", 1)[0]).name == RECIPE_NAME


@server.feature(lsp.INITIALIZE)
def on_initialize(ls: TrtlsServer, params: lsp.InitializeParams) -> None:
    ls.raw_init_options = params.initialization_options  # parsed on first use, after the answer


@server.feature(lsp.INITIALIZED)
def on_initialized(ls: TrtlsServer, params: lsp.InitializedParams) -> None:
    threading.Thread(target=warm_up, name="trtls-warm-up", daemon=True).start()
    _ = ls.options  # report invalid settings now rather than at the first build
    from trtls.lsp.documents import recipe_folders

    for folder in recipe_folders(ls.folders()):
        recover_builds(ls, folder)


@server.feature(lsp.SHUTDOWN)
async def on_shutdown(ls: TrtlsServer, params: None) -> None:
    # pygls 2.1.1 (#606): stop our builds before its own shutdown code iterates the request futures.
    if (supervisor := ls.supervisor_if_started) is not None:
        await supervisor.shutdown("service_shutdown")
    await ls.stop_own_work()  # a reduction's or a search's record written, a capability child ended
    await asyncio.sleep(0)


@server.feature(lsp.EXIT)
def on_exit(ls: TrtlsServer, params: None) -> None:
    ls.stop_checks()  # an `exit` without `shutdown`: no check starts while pygls unwinds
    wire_guard.exit_no_later_than(0 if ls.protocol._shutdown else 1)  # pygls then unwinds (wire_guard's doc)


@server.feature(lsp.TEXT_DOCUMENT_DID_OPEN)
def did_open(ls: TrtlsServer, params: lsp.DidOpenTextDocumentParams) -> None:
    if not is_recipe(params.text_document.uri):
        return
    path = _doc_uri(ls, params.text_document.uri)
    if path is None:
        return
    recover_builds(ls, path.parent)  # an opened recipe's folder is one the user chose (documents.py)
    ls.validate(params.text_document.uri)


@server.feature(lsp.TEXT_DOCUMENT_DID_CHANGE)
def did_change(ls: TrtlsServer, params: lsp.DidChangeTextDocumentParams) -> None:
    if not is_recipe(params.text_document.uri) or _doc_uri(ls, params.text_document.uri) is None:
        return
    ls.validate_later(params.text_document.uri)


@server.feature(lsp.TEXT_DOCUMENT_DID_SAVE)
def did_save(ls: TrtlsServer, params: lsp.DidSaveTextDocumentParams) -> None:
    if not is_recipe(params.text_document.uri) or _doc_uri(ls, params.text_document.uri) is None:
        return
    ls.validate(params.text_document.uri)


@server.feature(lsp.TEXT_DOCUMENT_CODE_LENS)
def code_lens(ls: TrtlsServer, params: lsp.CodeLensParams) -> list[lsp.CodeLens]:
    if not is_recipe(params.text_document.uri):
        return []
    from trtls.lsp import editor

    uri = params.text_document.uri
    loaded = ls.checked(uri)
    if loaded is None:
        return []  # a large document's check is still running; its end refreshes the lenses
    # ■ Stop over an engine whose cells build stops the whole matrix (its parent), not one cell
    running = {b.engine: b.parent_id or b.id for b in ls.runs.running_builds() if ls.runs.uri(b.id) == uri}
    last = {engine: bid for (u, engine), bid in ls.last_build.items() if u == uri}
    from trtls.lsp.recorded_runs import recorded_runs  # read off the event loop; the lenses are asked again after

    return editor.code_lenses(loaded, uri, running, last, recorded_runs(ls).latest)


@server.feature(lsp.TEXT_DOCUMENT_HOVER)
async def hover(ls: TrtlsServer, params: lsp.HoverParams) -> lsp.Hover | None:
    if not is_recipe(params.text_document.uri):
        return None
    loaded = ls.checked(params.text_document.uri)
    if loaded is None:
        return None
    from trtls.lsp.hover import hover_at, read_in_thread
    from trtls.lsp.recorded_runs import recorded_runs  # the last reading, never a reading on the event loop

    line, col = params.position.line, params.position.character  # in a thread: declared inputs, the last build's memory
    runs = recorded_runs(ls).latest  # asked here, on the event loop: the reading is started from it
    declared, memory = await asyncio.to_thread(read_in_thread, loaded, line, col, runs(loaded.path))
    text = hover_at(loaded, line, col, runs, declared, memory)
    return lsp.Hover(contents=lsp.MarkupContent(kind=lsp.MarkupKind.Markdown, value=text)) if text else None


@server.feature(lsp.TEXT_DOCUMENT_COMPLETION, lsp.CompletionOptions(trigger_characters=["=", " ", "["]))
async def completion(ls: TrtlsServer, params: lsp.CompletionParams) -> lsp.CompletionList:
    if not is_recipe(params.text_document.uri):
        return lsp.CompletionList(is_incomplete=False, items=[])
    from trtls.lsp import editor
    from trtls.lsp.documents import oversized
    from trtls.onnx_files.assist import model_for_engine

    doc = ls.workspace.get_text_document(params.text_document.uri)
    if oversized(doc.source):  # not checked either (TRT125): nothing to complete against
        return lsp.CompletionList(is_incomplete=False, items=[])
    path = _doc_uri(ls, params.text_document.uri)  # judged like every uri: no model read through a link out
    text = doc.source
    items = await asyncio.to_thread(  # in a thread: the model's input names may need the model read
        editor.completions,
        text,
        params.position.line,
        params.position.character,
        lambda engine: model_for_engine(path, text, engine) if path is not None else None,
    )
    return lsp.CompletionList(is_incomplete=False, items=items)


@server.feature(lsp.TEXT_DOCUMENT_CODE_ACTION, lsp.CodeActionOptions(code_action_kinds=[lsp.CodeActionKind.QuickFix]))
def code_action(ls: TrtlsServer, params: lsp.CodeActionParams) -> list[lsp.CodeAction]:
    if not is_recipe(params.text_document.uri):
        return []
    from trtls.lsp import editor
    from trtls.lsp.documents import oversized

    doc = ls.workspace.get_text_document(params.text_document.uri)
    if oversized(doc.source):
        return []
    from trtls.lsp.job_actions import job_actions

    diagnostics = list(params.context.diagnostics)
    uri = params.text_document.uri
    return editor.code_actions(uri, doc.source, diagnostics) + job_actions(ls, uri, diagnostics)


# -- commands ------------------------------------------------------------------------------------
@command("trtls.buildEngine")
async def build_engine(ls: TrtlsServer, args: BuildEngineArgs) -> wire.BuildEngineReply | wire.BuildMatrixReply:
    from trtls.lsp.build_commands import start_build

    return await start_build(ls, args)


@command("trtls.buildMatrix")
async def build_matrix(ls: TrtlsServer, args: BuildMatrixArgs) -> wire.BuildMatrixReply:
    from trtls.lsp.build_commands import start_matrix_build

    return await start_matrix_build(ls, args)


@command("trtls.cancelBuild")
def cancel_build(ls: TrtlsServer, args: CancelBuildArgs) -> wire.CancelBuildReply:
    from trtls.lsp.build_commands import stop_command

    return stop_command(ls, args)


@command("trtls.listBuilds")
def list_builds(ls: TrtlsServer, args: EmptyArgs) -> wire.ListBuildsReply:
    from trtls.core.wire import ListBuildsReply
    from trtls.lsp.run_kinds import listed

    return ListBuildsReply(builds=[listed(e) for e in ls.runs.entries()])


@command("trtls.showEvidence")
async def show_evidence(ls: TrtlsServer, args: BuildIdArgs) -> wire.EvidenceReply:
    """The finished run's evidence record: the file its kind writes (lsp/run_kinds.py) and the record."""
    from trtls.lsp.run_kinds import evidence, once_settled

    return await once_settled(ls, args.buildId, evidence)


@command("trtls.buildReport")
async def build_report(ls: TrtlsServer, args: BuildIdArgs) -> wire.BuildReportReply:
    """The finished build's HTML report (timeline, history, cancel, artifacts), also written as report.html."""
    from trtls.lsp.run_kinds import once_settled, report

    return await once_settled(ls, args.buildId, report)


@command("trtls.listTargets")
async def list_targets(ls: TrtlsServer, args: UriArgs) -> wire.ListTargetsReply:
    from trtls.core.wire import ListTargetsReply

    loaded = await ls.recipe_async(args.uri)
    data = loaded.data or {}
    return ListTargetsReply(
        engines=list((data.get("engines") or {}).keys()), routes=list((data.get("routes") or {}).keys())
    )


@command("trtls.runGates")
async def run_gates(ls: TrtlsServer, args: RunGatesArgs) -> wire.RunGatesReply:
    from trtls.lsp.gates_command import run_gates_command

    return await run_gates_command(ls, args)


@command("trtls.lockRoute")
async def lock_route(ls: TrtlsServer, args: LockRouteArgs) -> wire.LockRouteReply:
    """Record a route's checkpoint digests in trtls.lock.json, after the user confirms (TRT512's quick fix)."""
    from trtls.lsp.lock_command import lock_route_command

    return await lock_route_command(ls, args)


@command("trtls.allowLicense")
async def allow_license(ls: TrtlsServer, args: AllowLicenseArgs) -> wire.AllowLicenseReply:
    """Add a licence to a route's allow list — only after the user confirms, since it widens what ships."""
    from trtls.lsp.license_command import allow_license_command

    return await allow_license_command(ls, args)


def _register_more() -> None:
    from trtls.lsp import triage_commands_table, watched_files

    triage_commands_table.register(command)  # triage (docs/triage.md) and trtls.rollbackEngine (docs/store.md)
    watched_files.register(server)  # a ledger or a gates record changed on disk: check the recipe again


_register_more()


@command("trtls.printDebugInformation")
def print_debug_information(ls: TrtlsServer, args: EmptyArgs) -> wire.DebugInformationReply:
    from trtls.core.wire import DebugInformationReply
    from trtls.debug_info import as_text, debug_information

    info = {
        **debug_information(ls.probe_builder()),
        "settings": ls.options.model_dump(by_alias=True),
        "runningBuilds": [r.id for r in ls.runs.running()],
        "serverPid": os.getpid(),
    }
    text = as_text(info)
    ls.window_log_message(lsp.LogMessageParams(type=lsp.MessageType.Info, message=text))
    return DebugInformationReply(text=text, **info)


async def _terminate() -> None:
    """SIGTERM (a service manager stopping us): stop every build cooperatively, let each write its evidence
    (the supervisor bounds this by each build's grace + the kill), then exit 143 as the signal would."""
    await server.supervisor.shutdown("service_shutdown")
    await server.stop_own_work()  # a reduction's or a search's record too, a capability child ended
    os._exit(143)  # pygls' stdin reader thread blocks a normal exit; everything is on disk by now


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    try:
        loop = asyncio.get_running_loop()  # the handler runs on the main thread, which runs the loop
    except RuntimeError:
        os._exit(143)  # not serving yet: nothing to stop
    loop.call_soon_threadsafe(lambda: loop.create_task(_terminate()))


def serve() -> int:
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    logging.getLogger("pygls").setLevel(logging.WARNING)  # pygls logs every message it sends at INFO
    wire_guard.install()  # one line per client error; no popups; nothing sent after exit (see its doc)
    signal.signal(signal.SIGTERM, _on_sigterm)
    # Everything imported so far lives as long as the server: keep it out of full collections, which re-scan it and
    # pause the one event loop hover and completion share (farm/cluster.py does the same after Ray connects).
    gc.freeze()
    server.start_io(sys.stdin.buffer, wire_guard.ClosedSafeStdout(sys.stdout.buffer))  # type: ignore[arg-type]
    return wire_guard.exit_code  # 0 after shutdown, 1 without (wire_guard's doc)
