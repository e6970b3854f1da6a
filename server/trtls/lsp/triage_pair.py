"""`trtls.findDivergence {uri, candidate, reference?, engine?}`: where two given models with the same inputs part
ways (`trtls reduce --diverge --candidate`), as a stoppable run in the editor.

Both model paths come from the client, so each is judged like every uri (`lsp/documents.judge`: an absolute file:
URI whose real path is inside a workspace folder, or a file the client has open) and must be a regular file; the
reference defaults to the engine's ONNX. The search (`triage.diverge_pair`, ONNX Runtime on the CPU) runs off the
loop, answers at once with its id, shows one progress whose Cancel stops it, and ends in TRT981 on the engine table
(no quick fix: there is no conversion to exclude the node from)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcInvalidParams

from trtls.core import wire
from trtls.core.findings import Origin
from trtls.core.outcome import OutcomeKind
from trtls.lsp.progress_end import begin_stoppable_progress, end_progress

if TYPE_CHECKING:
    from trtls.lsp.command_args import FindDivergenceArgs
    from trtls.lsp.language_server import TrtlsServer
    from trtls.lsp.triage_command import DivergenceRun


def judged_model(ls: TrtlsServer, uri: str, what: str) -> Path:
    """The model file a client's uri names, judged like every uri, and a regular file; InvalidParams otherwise."""
    from trtls.lsp.documents import judge

    try:
        path = judge(uri, uri in ls.workspace.text_documents, ls.folders())
    except JsonRpcInvalidParams as exc:
        raise JsonRpcInvalidParams(f"{what}: {exc}") from None
    if not path.is_file():  # a folder, a FIFO (it would block the read), a device, or nothing
        raise JsonRpcInvalidParams(f"{what}: {path} is not a regular file")
    return path


async def find_pair_divergence(
    ls: TrtlsServer, args: FindDivergenceArgs, run_type: type[DivergenceRun]
) -> wire.FindDivergenceReply:
    """Start the search and answer at once with its id (a `run_type` run: triage_command's, which imports this)."""
    from trtls.builds.supervisor.build import new_build_id, state_dir
    from trtls.core.cancel import CancelToken
    from trtls.triage.diverge_pair import run_pair_divergence
    from trtls.triage.findings import divergence_finding

    assert args.candidate is not None
    if args.route is not None or args.fix:
        raise JsonRpcInvalidParams("candidate compares two given models: route and fix need a recipe's conversion")
    loaded = await ls.recipe_async(args.uri)
    if loaded.recipe is None:
        raise JsonRpcInvalidParams(f"{loaded.path.name} has errors: fix them first")
    if args.engine is None and args.reference is None:
        raise JsonRpcInvalidParams("candidate needs reference or engine (whose ONNX is the reference)")
    if args.engine is not None and args.engine not in loaded.recipe.engines:
        raise JsonRpcInvalidParams(f"no engine named {args.engine}")
    candidate = judged_model(ls, args.candidate, "candidate")
    if args.reference is not None:
        reference = judged_model(ls, args.reference, "reference")
    else:
        assert args.engine is not None
        reference = loaded.resolve(loaded.engine(args.engine).onnx)
    rid = new_build_id(f"diverge-{args.engine or reference.stem}")
    run = run_type(rid, args.engine, None, state_dir(loaded.path) / "reduce" / rid, CancelToken())
    run.step = f"comparing {candidate.name} with {reference.name}"
    ls.runs.add(run, "divergence", args.uri)
    token = None
    if ls.client_capabilities.window and ls.client_capabilities.window.work_done_progress:
        title = f"Find the first diverging layer: {candidate.name} against {reference.name}"
        begin = lsp.WorkDoneProgressBegin(title=title, cancellable=True, message=run.step)
        token = await begin_stoppable_progress(ls, "diverge", begin, lambda: run.cancel("ide_stop"))

    async def finish() -> None:
        try:
            record = await asyncio.to_thread(
                run_pair_divergence, loaded, reference, candidate, engine=args.engine, token=run.token, rid=rid
            )
        except Exception as exc:  # a model ONNX Runtime cannot load, inputs that differ: the record says it
            run.error = str(exc) if type(exc).__name__ == "DivergenceUnavailable" else f"{type(exc).__name__}: {exc}"
            record = _failed(run, reference, candidate)
        run.summary = record
        finding = divergence_finding(record)
        ls.store.set(args.uri, Origin.build, f"diverge:{args.engine or reference.stem}", [finding])
        ls.publish(args.uri)
        ls.runs.evict()
        if token is not None:
            kind: OutcomeKind = "cancelled" if record.get("cancelled") else "failed" if run.error else "ok"
            end_progress(ls, token, finding.message, run.status, kind)

    asyncio.ensure_future(finish())
    return wire.FindDivergenceReply(divergenceId=rid, engine=args.engine, route=None, status="started")


def _failed(run: DivergenceRun, reference: Path, candidate: Path) -> dict[str, Any]:
    return {
        "kind": "divergence", "mode": "models", "id": run.id, "engine": run.engine, "route": None,
        "precision": None, "reference": str(reference), "candidate": str(candidate), "firstDiverging": None,
        "cancelled": run.token.is_set, "cancelSource": run.token.source, "error": run.error, "rounds": [],
        "folder": str(run.folder),
    }  # fmt: skip
