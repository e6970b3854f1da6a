"""What TensorRT said at an engine's last build, in an editor that did not start that build (issue 33): real
`trtls build` runs from the CLI of the quickstart `demo` (the parser takes every node) and of a model with an op no
importer knows (the parser refuses that node), then a real language server over stdio started afterwards. Its lenses
show Evidence and the recorded capability, showEvidence answers that build, and hovering the engine's `onnx` key says
the recorded answer, dated, and whether the model is still the one that build read. A terminal's build after the
editor's own is the one the lenses show. The records are read off the event loop (lsp/recorded_runs.py): a lens is
answered from the last reading, so each test asks until the reading it waits for has landed."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import onnx
import pytest
from lsprotocol import types as lsp
from onnx import TensorProto, helper
from pytest_lsp import ClientServerConfig, LanguageClient

from tests.lsp.conftest import SERVER, accept_refresh, caps
from tests.lsp.lsp_helpers import TIMEOUT, execute, open_recipe
from tests.store.helpers import summaries
from trtls.core.capability import capability_summary

UNKNOWN_ENGINE = '\n[engines.unknown]\nonnx = "models/unknown.onnx"\noutput = "build/u.engine"\n'


def _unknown_op_model(path: Path) -> None:
    """One node of an op no ONNX importer knows: TensorRT-RTX's parser refuses it with its own reason."""
    node = helper.make_node("NoSuchOp", ["input"], ["output"], name="mystery_node", domain="com.example")
    graph = helper.make_graph(
        [node],
        "unknown",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 4])],
    )
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("com.example", 1)]
    onnx.save(helper.make_model(graph, opset_imports=opsets), str(path))


def _build(ws: Path, engine: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "trtls", "build", str(ws), "--engine", engine, "--no-store"],
        cwd=ws,
        capture_output=True,
        text=True,
        timeout=600,
    )


def _line(text: str, table: str, key: str) -> int:
    """The line of `key` inside `[table]`."""
    lines = text.splitlines()
    start = lines.index(f"[{table}]")
    return next(i for i in range(start + 1, len(lines)) if lines[i].startswith(f"{key} ="))


@pytest.fixture
def recorded(workspace: Path) -> dict[str, dict[str, Any]]:
    """The workspace after two CLI builds: `demo` (built) and `unknown` (refused by the parser); engine → record."""
    _unknown_op_model(workspace / "models" / "unknown.onnx")
    recipe = workspace / "trtls.toml"
    recipe.write_text(recipe.read_text() + UNKNOWN_ENGINE)
    built = _build(workspace, "demo")
    assert built.returncode == 0, built.stderr
    assert _build(workspace, "unknown").returncode != 0
    records = {s["engine"]: s for s in summaries(workspace)}
    assert records["unknown"]["capability"]["status"] == "refused"
    return records


async def evidence_lenses(client: LanguageClient, uri: str, want: dict[int, str]) -> dict[int, list[lsp.Command]]:
    """The lenses by line once every line of `want` has an Evidence lens of that build: asked again after each
    reading of the records lands (the server asks for a refresh), as an editor does."""
    loop = asyncio.get_running_loop()
    end = loop.time() + TIMEOUT
    while True:
        lenses = await client.text_document_code_lens_async(lsp.CodeLensParams(lsp.TextDocumentIdentifier(uri)))
        by_line: dict[int, list[lsp.Command]] = {}
        for lens in lenses or []:
            assert lens.command is not None
            by_line.setdefault(lens.range.start.line, []).append(lens.command)
        shown = {
            line: [list(c.arguments or []) for c in by_line.get(line, []) if c.title == "Evidence"] for line in want
        }
        if all(shown[line] == [[{"buildId": build_id}]] for line, build_id in want.items()):
            return by_line
        assert loop.time() < end, f"the lenses never showed {want}: {shown}"
        await asyncio.sleep(0.05)


@asynccontextmanager
async def server_started_after(
    ws: Path, env: dict[str, str] | None = None
) -> AsyncIterator[tuple[LanguageClient, str]]:
    """A real server over stdio that saw none of the builds (`env` added to its environment), with the recipe open."""
    config = ClientServerConfig(server_command=SERVER, server_env={**os.environ, **(env or {})})
    client = await config.start()
    try:
        accept_refresh(client)
        await client.initialize_session(lsp.InitializeParams(capabilities=caps()))
        yield client, open_recipe(client, ws)
    finally:
        await client.shutdown_session()
        await client.stop()


async def test_lenses_show_evidence_and_capability_of_a_terminal_build(
    workspace: Path, recorded: dict[str, dict[str, Any]]
) -> None:
    text = (workspace / "trtls.toml").read_text()
    async with server_started_after(workspace) as (client, uri):
        header = {engine: text.splitlines().index(f"[engines.{engine}]") for engine in recorded}
        by_line = await evidence_lenses(client, uri, {header[e]: r["buildId"] for e, r in recorded.items()})
        said: list[str] = []
        for engine, record in recorded.items():
            commands = by_line[text.splitlines().index(f"[engines.{engine}]")]
            evidence = [c for c in commands if c.title == "Evidence"]
            assert [list(c.arguments or []) for c in evidence] == [[{"buildId": record["buildId"]}]], commands
            said = [c.title for c in commands if c.title.startswith("capability · ")]
            assert said == [f"capability · {capability_summary(record['capability'])}"]
        assert said[0].endswith(": the parser refuses 1 node"), said
        # the Evidence lens's command answers that build although this server did not start it
        demo = recorded["demo"]["buildId"]
        shown = await execute(client, "trtls.showEvidence", {"buildId": demo})
        assert shown["summary"]["buildId"] == demo and shown["path"].endswith("summary.json")
        listed = await execute(client, "trtls.listBuilds", {})
        assert listed["builds"] == [], "a recorded build is shown, not adopted as this server's run"


async def test_hover_on_onnx_says_the_recorded_answer_dated_and_whether_the_model_changed(
    workspace: Path, recorded: dict[str, dict[str, Any]]
) -> None:
    text = (workspace / "trtls.toml").read_text()
    async with server_started_after(workspace) as (client, uri):
        header = {engine: text.splitlines().index(f"[engines.{engine}]") for engine in recorded}
        await evidence_lenses(client, uri, {header[e]: r["buildId"] for e, r in recorded.items()})

        async def hover(engine: str) -> str:
            where = lsp.Position(_line(text, f"engines.{engine}", "onnx"), 1)
            answer = await client.text_document_hover_async(lsp.HoverParams(lsp.TextDocumentIdentifier(uri), where))
            assert answer is not None and isinstance(answer.contents, lsp.MarkupContent)
            return answer.contents.value

        said_demo = await hover("demo")
        assert "What TensorRT said at the build of 20" in said_demo and recorded["demo"]["buildId"] in said_demo
        assert "the parser takes every node and the builder takes the network" in said_demo
        assert "Model unchanged: it is the one that build read (same sha256)" in said_demo
        assert "not re-checked now" not in said_demo
        said_unknown = await hover("unknown")
        [node] = recorded["unknown"]["capability"]["parser"]["nodes"]
        # the diagnostics' words (op type, node name, the parser's reason), the name's `_` escaped as Markdown text
        assert "node 0 'mystery\\_node' (NoSuchOp)" in said_unknown, said_unknown
        assert node["name"] == "mystery_node" and node["reason"] and node["reason"][:40] in said_unknown
        assert "the parser refuses 1 node" in said_unknown
        # a failed build's record names the model it read too (tests/lsp/test_failed_build_freshness_lsp.py)
        assert "Model unchanged" in said_unknown and "not re-checked now" not in said_unknown

        model = onnx.load(str(workspace / "models" / "demo.onnx"))
        model.doc_string = "edited after the build"
        onnx.save(model, str(workspace / "models" / "demo.onnx"))
        changed = await hover("demo")
        assert "A record of that build, not re-checked now: the model changed since this build" in changed
        assert "the parser takes every node" in changed


async def test_a_terminal_build_after_the_editors_own_is_the_one_the_lenses_show(
    client: LanguageClient, workspace: Path
) -> None:
    uri = open_recipe(client, workspace)
    mine = (await execute(client, "trtls.buildEngine", {"uri": uri, "engine": "demo"}))["buildId"]
    while True:  # until this server's build has finished (its row in trtls.listBuilds)
        rows = (await execute(client, "trtls.listBuilds", {}))["builds"]
        if [r["status"] for r in rows if r["buildId"] == mine] == ["built"]:
            break
        await asyncio.sleep(0.1)
    terminal = await asyncio.to_thread(_build, workspace, "demo")
    assert terminal.returncode == 0, terminal.stderr
    later = [s["buildId"] for s in summaries(workspace) if s["buildId"] != mine]
    assert len(later) == 1
    header = (workspace / "trtls.toml").read_text().splitlines().index("[engines.demo]")
    await evidence_lenses(client, uri, {header: later[0]})  # the newer build, not this session's
    # this server's own build is still its run; the terminal's is answered as the one its lens shows
    assert (await execute(client, "trtls.showEvidence", {"buildId": mine}))["summary"]["buildId"] == mine
    assert (await execute(client, "trtls.showEvidence", {"buildId": later[0]}))["summary"]["buildId"] == later[0]
