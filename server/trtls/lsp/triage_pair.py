"""The model files of `trtls.findDivergence {uri, candidate, reference?, engine?}`: where two given models with the
same inputs part ways (`trtls reduce --diverge --candidate`), started through trtls.app.triage like every search.

Both model paths come from the client, so each is judged like every uri (`lsp/documents.judge`: an absolute file:
URI whose real path is inside a workspace folder, or a file the client has open) and must be a regular file; the
reference defaults to the engine's ONNX (the application layer's rule). The search ends in TRT981 on the engine table
(no quick fix: there is no conversion to exclude the node from)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from pygls.exceptions import JsonRpcInvalidParams

if TYPE_CHECKING:
    from trtls.lsp.command_args import FindDivergenceArgs
    from trtls.lsp.language_server import TrtlsServer


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


def judged_models(ls: TrtlsServer, args: FindDivergenceArgs) -> tuple[Path | None, Path | None]:
    """(candidate, reference) as files, each judged; a reference without a candidate is passed on unread (the
    application layer refuses the request: nothing is compared with it)."""
    if args.candidate is None:
        return None, Path(args.reference) if args.reference is not None else None
    candidate = judged_model(ls, args.candidate, "candidate")
    reference = judged_model(ls, args.reference, "reference") if args.reference is not None else None
    return candidate, reference
