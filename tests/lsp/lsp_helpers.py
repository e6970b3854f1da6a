"""Shared helpers for the LSP tests (a real server over stdio)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from lsprotocol import types as lsp
from pytest_lsp import LanguageClient

TIMEOUT = 120


def open_recipe(client: LanguageClient, ws: Path) -> str:
    path = ws / "trtls.toml"
    uri = path.as_uri()
    client.text_document_did_open(
        lsp.DidOpenTextDocumentParams(
            lsp.TextDocumentItem(uri=uri, language_id="toml", version=1, text=path.read_text())
        )
    )
    return uri


async def execute(client: LanguageClient, command: str, arg: dict[str, Any]) -> Any:
    return await client.workspace_execute_command_async(lsp.ExecuteCommandParams(command=command, arguments=[arg]))


async def until(predicate, timeout: float = TIMEOUT) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not predicate():
        assert loop.time() < end, "condition not met in time"
        await asyncio.sleep(0.05)


def answering(client: LanguageClient, title: str) -> list[str]:
    """The editor's side of the server's questions (window/showMessageRequest): each one answered `title`; the
    questions asked, as they come."""
    asked: list[str] = []

    @client.feature(lsp.WINDOW_SHOW_MESSAGE_REQUEST)
    def confirm(params: lsp.ShowMessageRequestParams) -> lsp.MessageActionItem:
        asked.append(params.message)
        return lsp.MessageActionItem(title=title)

    return asked


def raw_progress_ends(client: LanguageClient) -> dict[str, dict[str, Any]]:
    """The `$/progress` end values as sent (token → JSON). The test client types them as WorkDoneProgressEnd,
    which has only `message`: the extra `outcome`/`outcomeKind` the server sends would be dropped."""
    ends: dict[str, dict[str, Any]] = {}
    typed = client.protocol.fm.features[lsp.PROGRESS]

    def record(params: lsp.ProgressParams) -> None:
        if isinstance(params.value, dict) and params.value.get("kind") == "end":
            ends[str(params.token)] = dict(params.value)
        typed(params)

    client.protocol.fm.features[lsp.PROGRESS] = record
    return ends


def command_of(action) -> tuple[str, list]:
    """pygls' client decodes a command-only CodeAction through the Command|CodeAction union as a Command
    whose `command` field is the stringified inner command (the wire JSON is a proper CodeAction)."""
    import ast

    inner = action.command
    if isinstance(inner, lsp.Command):
        return inner.command, list(inner.arguments or [])
    parsed = ast.literal_eval(inner)
    return parsed["command"], parsed["arguments"]


def write_static_onnx(path: Path) -> Path:
    """A real one-node ONNX model with a static input `x` [1, 4] (needs no optimization profile)."""
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])],
        "static",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def plain(obj: Any) -> Any:
    """pygls hands custom notification params over as namedtuple-like objects: make them dicts."""
    if hasattr(obj, "_asdict"):
        return {k: plain(v) for k, v in obj._asdict().items()}
    if isinstance(obj, (list, tuple)):
        return [plain(v) for v in obj]
    return obj


def record_trees(client: LanguageClient) -> list[dict[str, Any]]:
    """Every `trtls/buildTree` notification the server sends the client, as plain data, as they come."""
    trees: list[dict[str, Any]] = []
    client.feature("trtls/buildTree")(lambda params: trees.append(plain(params)))
    return trees


def last_of(trees: list[dict[str, Any]], build_id: str) -> dict[str, Any] | None:
    mine = [t for t in trees if t.get("buildId") == build_id]
    return mine[-1] if mine else None


def finished(trees: list[dict[str, Any]], build_id: str) -> bool:
    """The build's last row is final: not running, with its evidence."""
    t = last_of(trees, build_id)
    return t is not None and t["running"] is False and t.get("evidencePath") is not None
