"""The trtls language server: a thin LSP layer over the build core and the gates.

Its documents are `trtls.toml` recipes. It never imports TensorRT (builds run in worker processes),
so initialize stays fast. Commands (workspace/executeCommand, one argument object each):

    trtls.buildEngine {uri, engine, retry?}  → {buildId, engine, status: "started" | "already_building"}
    trtls.cancelBuild {buildId, source?}     → {buildId, accepted}
                                               (source: api, or ide_stop from an editor button)
    trtls.listBuilds {}                      → {builds: [...]}
    trtls.showEvidence {buildId}             → {buildId, path, summary}
    trtls.buildReport {buildId}              → {buildId, path, html}  (the `trtls report` page, for a webview)
    trtls.listTargets {uri}                  → {engines, routes}
    trtls.runGates {uri, route}              → {route, decision, checks, summaryPath}
    trtls.printDebugInformation {}           → {text, ...}

A second Build of an engine that is already building does not start another build: it answers
`already_building` with the running build's id (the progress and tree already show it).
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import signal
import sys
import threading
from pathlib import Path, PurePosixPath
from typing import Any

from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcInvalidParams
from pygls.uris import to_fs_path

from trtls.lsp.language_server import TrtlsServer, warm_up


def recover_builds(ls: TrtlsServer, folder: Path) -> None:
    from trtls.lsp.build_commands import recover

    recover(ls, folder)


server = TrtlsServer()


def _args(model: str, raw: Any) -> Any:
    """Validate a command's one argument object (models in command_args, loaded on first use)."""
    from trtls.lsp import command_args

    return command_args.parse_args(getattr(command_args, model), raw)


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
    for folder in ls.workspace.folders.values():
        root = Path(to_fs_path(folder.uri) or "")
        for candidate in [root, *root.glob("*"), *root.glob("*/*")]:
            if candidate.is_dir() and (candidate / ".trtls").is_dir():
                recover_builds(ls, candidate)


@server.feature(lsp.SHUTDOWN)
async def on_shutdown(ls: TrtlsServer, params: Any) -> None:
    # pygls 2.1.1 (#606): stop our builds before its own shutdown code iterates the request futures.
    await ls.supervisor.shutdown("service_shutdown")
    await asyncio.sleep(0)


@server.feature(lsp.TEXT_DOCUMENT_DID_OPEN)
def did_open(ls: TrtlsServer, params: lsp.DidOpenTextDocumentParams) -> None:
    if not is_recipe(params.text_document.uri):
        return
    path = Path(to_fs_path(params.text_document.uri) or "")
    recover_builds(ls, path.parent)
    ls.validate(params.text_document.uri)


@server.feature(lsp.TEXT_DOCUMENT_DID_CHANGE)
def did_change(ls: TrtlsServer, params: lsp.DidChangeTextDocumentParams) -> None:
    if not is_recipe(params.text_document.uri):
        return
    ls.validate_later(params.text_document.uri)


@server.feature(lsp.TEXT_DOCUMENT_DID_SAVE)
def did_save(ls: TrtlsServer, params: lsp.DidSaveTextDocumentParams) -> None:
    if not is_recipe(params.text_document.uri):
        return
    ls.validate(params.text_document.uri)


@server.feature(lsp.TEXT_DOCUMENT_CODE_LENS)
def code_lens(ls: TrtlsServer, params: lsp.CodeLensParams) -> list[lsp.CodeLens]:
    if not is_recipe(params.text_document.uri):
        return []
    from trtls.lsp import editor

    uri = params.text_document.uri
    loaded = ls.recipes.get(uri) or ls.recipe(uri)
    # ■ Stop over an engine whose cells build stops the whole matrix (its parent), not one cell
    running = {b.engine: b.parent_id or b.id for b in ls.supervisor.running() if ls.build_uri.get(b.id) == uri}
    last = {engine: bid for (u, engine), bid in ls.last_build.items() if u == uri}
    return editor.code_lenses(loaded, uri, running, last)


@server.feature(lsp.TEXT_DOCUMENT_HOVER)
def hover(ls: TrtlsServer, params: lsp.HoverParams) -> lsp.Hover | None:
    if not is_recipe(params.text_document.uri):
        return None
    from trtls.lsp import editor

    loaded = ls.recipes.get(params.text_document.uri) or ls.recipe(params.text_document.uri)
    text = editor.hover(loaded, params.position.line, params.position.character)
    return lsp.Hover(contents=lsp.MarkupContent(kind=lsp.MarkupKind.Markdown, value=text)) if text else None


@server.feature(lsp.TEXT_DOCUMENT_COMPLETION, lsp.CompletionOptions(trigger_characters=["=", " ", "["]))
def completion(ls: TrtlsServer, params: lsp.CompletionParams) -> lsp.CompletionList:
    if not is_recipe(params.text_document.uri):
        return lsp.CompletionList(is_incomplete=False, items=[])
    from trtls.lsp import editor
    from trtls.models.assist import model_for_engine

    doc = ls.workspace.get_text_document(params.text_document.uri)
    path = Path(to_fs_path(params.text_document.uri) or params.text_document.uri)
    items = editor.completions(
        doc.source,
        params.position.line,
        params.position.character,
        lambda engine: model_for_engine(path, doc.source, engine),
    )
    return lsp.CompletionList(is_incomplete=False, items=items)


@server.feature(lsp.TEXT_DOCUMENT_CODE_ACTION, lsp.CodeActionOptions(code_action_kinds=[lsp.CodeActionKind.QuickFix]))
def code_action(ls: TrtlsServer, params: lsp.CodeActionParams) -> list[lsp.CodeAction]:
    if not is_recipe(params.text_document.uri):
        return []
    from trtls.lsp import editor

    doc = ls.workspace.get_text_document(params.text_document.uri)
    return editor.code_actions(params.text_document.uri, doc.source, list(params.context.diagnostics))


# -- commands ------------------------------------------------------------------------------------
@server.command("trtls.buildEngine")
async def build_engine(ls: TrtlsServer, args: Any = None) -> dict[str, Any]:
    from trtls.lsp.build_commands import start_build

    return await start_build(ls, _args("BuildEngineArgs", args))


@server.command("trtls.buildMatrix")
async def build_matrix(ls: TrtlsServer, args: Any = None) -> dict[str, Any]:
    from trtls.lsp.build_commands import start_matrix_build

    return await start_matrix_build(ls, _args("BuildMatrixArgs", args))


@server.command("trtls.cancelBuild")
def cancel_build(ls: TrtlsServer, args: Any = None) -> dict[str, Any]:
    a = _args("CancelBuildArgs", args)
    build = ls.supervisor.builds.get(a.buildId) or ls.matrices.get(a.buildId)  # a cell, a build, or a whole matrix
    if build is None:
        raise JsonRpcInvalidParams(f"no build with id '{a.buildId}' (see trtls.listBuilds)")
    accepted = build.running and build.cancel(a.source)
    return {"buildId": a.buildId, "accepted": bool(accepted), "status": build.status}


@server.command("trtls.listBuilds")
def list_builds(ls: TrtlsServer, args: Any = None) -> dict[str, Any]:
    builds = []
    for b in ls.supervisor.builds.values():
        builds.append(
            {
                "buildId": b.id,
                "engine": b.engine,
                "uri": ls.build_uri.get(b.id),
                "status": b.status,
                "cancelSource": b.token.source,
                "elapsedS": round(b.elapsed_s(), 3) if b.running else (b.summary or {}).get("durationS"),
                "evidencePath": str(b.evidence_dir / "summary.json") if b.summary else None,
                "parentId": b.parent_id,
                "cell": b.cell,
            }
        )
    for m in ls.matrices.values():
        builds.append(
            {
                "buildId": m.id,
                "engine": m.title,
                "kind": "matrix",
                "uri": ls.build_uri.get(m.id),
                # fmt: skip
                "status": m.status,
                "cancelSource": m.cancel_source,
                "cells": [c.id for c in m.cells],
            }
        )
    return {"builds": builds}


@server.command("trtls.showEvidence")
def show_evidence(ls: TrtlsServer, args: Any = None) -> dict[str, Any]:
    a = _args("BuildIdArgs", args)
    build = ls.supervisor.builds.get(a.buildId) or ls.matrices.get(a.buildId)  # a matrix: its cells and where they ran
    if build is None or build.summary is None:
        state = "still running" if build is not None else "unknown"
        raise JsonRpcInvalidParams(f"build '{a.buildId}' is {state}; evidence exists once a build has finished")
    return {"buildId": a.buildId, "path": str(build.evidence_dir / "summary.json"), "summary": build.summary}


@server.command("trtls.buildReport")
def build_report(ls: TrtlsServer, args: Any = None) -> dict[str, Any]:
    """The finished build's HTML report (timeline, history, cancel, artifacts), also written as report.html."""
    a = _args("BuildIdArgs", args)
    build = ls.supervisor.builds.get(a.buildId)
    if build is None or build.summary is None:
        state = "still running" if build is not None else "unknown"
        raise JsonRpcInvalidParams(f"build '{a.buildId}' is {state}; its timeline exists once it has finished")
    from trtls.core.atomic import atomic_write_text
    from trtls.report.build_page import build_report as render
    from trtls.report.evidence import load_build

    html = render(load_build(build.evidence_dir))
    path = build.evidence_dir / "report.html"
    atomic_write_text(path, html)
    return {"buildId": a.buildId, "path": str(path), "html": html}


@server.command("trtls.listTargets")
def list_targets(ls: TrtlsServer, args: Any = None) -> dict[str, Any]:
    a = _args("UriArgs", args)
    loaded = ls.recipe(a.uri)
    data = loaded.data or {}
    return {"engines": list((data.get("engines") or {}).keys()), "routes": list((data.get("routes") or {}).keys())}


@server.command("trtls.runGates")
async def run_gates(ls: TrtlsServer, args: Any = None) -> dict[str, Any]:
    a = _args("RunGatesArgs", args)
    from trtls.lsp.gates_command import run_gates_command

    return await run_gates_command(ls, a)


@server.command("trtls.lockRoute")
async def lock_route(ls: TrtlsServer, args: Any = None) -> dict[str, Any]:
    """Record a route's checkpoint digests in trtls.lock.json, after the user confirms (TRT512's quick fix)."""
    from trtls.lsp.lock_command import lock_route_command

    return await lock_route_command(ls, _args("LockRouteArgs", args))


@server.command("trtls.allowLicense")
async def allow_license(ls: TrtlsServer, args: Any = None) -> dict[str, Any]:
    """Add a licence to a route's allow list — only after the user confirms, since it widens what ships."""
    a = _args("AllowLicenseArgs", args)
    loaded = ls.recipe(a.uri)
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
        return {"applied": False}
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
    return {"applied": bool(result.applied)}


@server.command("trtls.printDebugInformation")
def print_debug_information(ls: TrtlsServer, args: Any = None) -> dict[str, Any]:
    from trtls.debug_info import as_text, debug_information

    info = {
        **debug_information(ls.probe_builder()),
        "settings": ls.options.model_dump(by_alias=True),
        "runningBuilds": [b.id for b in ls.supervisor.running()],
        "serverPid": os.getpid(),
    }
    text = as_text(info)
    ls.window_log_message(lsp.LogMessageParams(type=lsp.MessageType.Info, message=text))
    return {"text": text, **info}


async def _terminate() -> None:
    """SIGTERM (a service manager stopping us): stop every build cooperatively, let each write its evidence
    (the supervisor bounds this by each build's grace + the kill), then exit 143 as the signal would."""
    await server.supervisor.shutdown("service_shutdown")
    os._exit(143)  # pygls' stdin reader thread blocks a normal exit; everything is on disk by now


def _on_sigterm(signum: int, frame: Any) -> None:
    try:
        loop = asyncio.get_running_loop()  # the handler runs on the main thread, which runs the loop
    except RuntimeError:
        os._exit(143)  # not serving yet: nothing to stop
    loop.call_soon_threadsafe(lambda: loop.create_task(_terminate()))


def serve() -> None:
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    logging.getLogger("pygls").setLevel(logging.WARNING)  # pygls logs every message it sends at INFO
    signal.signal(signal.SIGTERM, _on_sigterm)
    # Everything imported so far lives as long as the server: keep it out of full collections, which otherwise
    # re-scan it and pause the one event loop that hover and completion share (farm/cluster.py does the same
    # after Ray connects).
    gc.freeze()
    server.start_io()
