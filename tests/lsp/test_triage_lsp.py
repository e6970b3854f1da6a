"""The triage jobs in the editor, over the real server: a TRT206 build failure offers "Reduce the failing model";
the reduction runs as a stoppable progress with every trial a build, ends in a located TRT980 on the engine table
with "Open the minimal model" and "Build the minimal model", and the latter is a real build of that model."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from lsprotocol import types as lsp
from pytest_lsp import LanguageClient

from .lsp_helpers import command_of, execute, open_recipe, raw_progress_ends, until

SMEM = "[engines.demo.builder]\noptimization_level = 3\n"


def _diagnostics(client: LanguageClient, uri: str, code: str) -> list[lsp.Diagnostic]:
    return [d for d in client.diagnostics.get(uri, []) if d.code == code]


async def _actions(client: LanguageClient, uri: str, diagnostic: lsp.Diagnostic) -> dict[str, tuple[str, list]]:
    actions = await client.text_document_code_action_async(
        lsp.CodeActionParams(
            text_document=lsp.TextDocumentIdentifier(uri=uri),
            range=diagnostic.range,
            context=lsp.CodeActionContext(diagnostics=[diagnostic]),
        )
    )
    return {a.title: command_of(a) for a in actions or []}


async def test_reduce_from_a_tensorrt_failure_to_a_minimal_model_and_build_it(
    client: LanguageClient, workspace: Path
) -> None:
    recipe = workspace / "trtls.toml"
    recipe.write_text(
        recipe.read_text().replace(SMEM, SMEM + "memory_pool_limits = { tactic_shared_memory_kib = 32 }\n")
    )
    ends = raw_progress_ends(client)
    uri = open_recipe(client, workspace)
    started = await execute(client, "trtls.buildEngine", {"uri": uri, "engine": "demo"})
    await until(lambda: bool(_diagnostics(client, uri, "TRT206")))
    (failure,) = _diagnostics(client, uri, "TRT206")
    actions = await _actions(client, uri, failure)
    command, arguments = actions["Reduce the failing model"]
    assert command == "trtls.reduceEngine" and arguments == [{"uri": uri, "engine": "demo"}]

    reply = await execute(client, command, arguments[0])
    assert reply["status"] == "started" and reply["reductionId"].startswith("reduce-demo-")
    await until(lambda: bool(_diagnostics(client, uri, "TRT980")), timeout=600)
    (result,) = _diagnostics(client, uri, "TRT980")
    line = recipe.read_text().splitlines()[result.range.start.line]
    assert line.strip() == "[engines.demo]", "located on the engine table"
    import onnx

    nodes = len(onnx.load(str(workspace / "models" / "demo.onnx"), load_external_data=False).graph.node)
    assert "tactic_shared_memory_kib = 32" in result.message and f"{nodes} → 1 nodes" in result.message
    # the result is published before the progress ends (finish() in lsp/triage_command.py): wait for the end too
    await until(lambda: any("the settings are the cause" in e.get("message", "") for e in ends.values()))
    listed = await execute(client, "trtls.listBuilds", {})
    trials = [b for b in listed["builds"] if b.get("buildId", "").startswith(reply["reductionId"] + ".t")]
    assert len(trials) >= 3, "every trial is a build the Builds view lists"
    assert started["buildId"] not in [t["buildId"] for t in trials]

    actions = await _actions(client, uri, result)
    assert "Open the minimal model" in actions, (result.data, actions)
    assert actions["Open the minimal model"][0] == "trtls.showDocument"
    assert actions["Open the minimal model"][1][0]["path"].endswith("minimal.onnx")
    command, arguments = actions["Build the minimal model"]
    built = await execute(client, command, arguments[0])
    for _ in range(1200):
        rows = (await execute(client, "trtls.listBuilds", {}))["builds"]
        if any(r["buildId"] == built["buildId"] and r["status"] not in ("starting", "running") for r in rows):
            break
        await asyncio.sleep(0.1)
    shown = await execute(client, "trtls.showEvidence", {"buildId": built["buildId"]})
    summary = shown["summary"]
    assert summary["outcome"] == "failed" and summary["failure"]["assertion"].startswith("CHECK_GE(smem_limit")
    assert not (workspace / "build" / "demo.engine").exists(), "the engine's own output is never written"


def _diverge_workspace(root: Path) -> Path:
    from tests.triage.diverge_model import RECIPE, write_model

    ws = root / "diverge-ws"
    (ws / "models").mkdir(parents=True)
    write_model(ws / "models" / "enc.onnx")
    (ws / "trtls.toml").write_text(RECIPE)
    return ws


def _token(client: LanguageClient, kind: str, seen: set[str]) -> str | None:
    return next(
        (t for t in map(str, client.progress_reports) if t.startswith(f"trtls-{kind}-") and t not in seen), None
    )


def _ended(client: LanguageClient, token: str) -> bool:
    return any(isinstance(r, lsp.WorkDoneProgressEnd) for r in client.progress_reports.get(token, []))


async def _row(client: LanguageClient, run_id: str) -> dict:
    (row,) = [b for b in (await execute(client, "trtls.listBuilds", {}))["builds"] if b["buildId"] == run_id]
    return row


async def _start_and_stop(client: LanguageClient, uri: str, how: str, seen: set[str], ends: dict) -> None:
    reply = await execute(client, "trtls.findDivergence", {"uri": uri, "engine": "enc"})
    assert reply["status"] == "started" and reply["divergenceId"].startswith("diverge-enc-")
    rid = reply["divergenceId"]
    await until(lambda: _token(client, "diverge", seen) is not None)
    token = _token(client, "diverge", seen)
    assert token is not None
    seen.add(token)
    await until(lambda: bool(client.progress_reports[token]))  # begun once the client's answer reached the server
    begin = client.progress_reports[token][0]
    assert isinstance(begin, lsp.WorkDoneProgressBegin) and begin.cancellable is True
    messages = lambda: [getattr(r, "message", "") or "" for r in client.progress_reports[token]]  # noqa: E731
    await until(lambda: any("converting to fp16" in m for m in messages()))
    row = await _row(client, rid)
    assert row["kind"] == "divergence" and row["status"] == "running", row
    if how == "api":
        ack = await execute(client, "trtls.cancelBuild", {"buildId": rid})
        assert ack["accepted"] is True
    else:
        client.window_work_done_progress_cancel(lsp.WorkDoneProgressCancelParams(token=token))
    await until(lambda: _ended(client, token), timeout=300)
    assert ends[token]["outcome"] == "cancelled" and ends[token]["outcomeKind"] == "cancelled", ends[token]
    row = await _row(client, rid)
    assert row["status"] == "cancelled" and row["cancelSource"] == how, row
    record = json.loads(Path(row["evidencePath"]).read_text())
    assert record["cancelled"] is True and record["cancelSource"] == how and record["rounds"] == []
    assert record["firstDiverging"] is None, "a stopped search gives no verdict"
    (found,) = _diagnostics(client, uri, "TRT981")
    assert "stopped" in found.message and "fix" not in found.data, found
    assert (await execute(client, "trtls.cancelBuild", {"buildId": rid}))["accepted"] is False, "it has ended"


def _apply(text: str, edits: list[lsp.TextEdit]) -> str:
    """The edits applied to `text`, last first (LSP positions: line and character)."""
    for edit in sorted(edits, key=lambda e: (e.range.start.line, e.range.start.character), reverse=True):
        lines = text.splitlines(keepends=True)

        def offset(p: lsp.Position, lines: list[str] = lines) -> int:
            return sum(len(x) for x in lines[: p.line]) + p.character

        text = text[: offset(edit.range.start)] + edit.new_text + text[offset(edit.range.end) :]
    return text


async def test_find_divergence_is_a_stoppable_run_by_id_and_by_the_progress_cancel(
    client: LanguageClient, tmp_path: Path
) -> None:
    """The search answers at once; while it converts (ModelOpt's child, seconds in a fresh workspace) its progress
    says so and it is a running row of listBuilds; trtls.cancelBuild {its id} ends it cancelled (source api) with
    its evidence, and the progress's Cancel does the same as ide_stop. No verdict, no quick fix."""
    ws = _diverge_workspace(tmp_path)
    ends = raw_progress_ends(client)
    uri = open_recipe(client, ws)
    seen: set[str] = set()
    for how in ("api", "ide_stop"):
        await _start_and_stop(client, uri, how, seen, ends)


async def test_find_divergence_ends_in_trt981_whose_quick_fix_adds_exclude_nodes(
    client: LanguageClient, tmp_path: Path
) -> None:
    """Run to the end on the made-up model: TRT981 on [engines.enc] names proj_tiny; its quick fix is a WorkspaceEdit
    that puts exclude_nodes = ["proj_tiny"] into [engines.enc.precision], and the edited recipe loads with it."""
    from trtls.core.recipe import load_recipe

    ws = _diverge_workspace(tmp_path)
    recipe = ws / "trtls.toml"
    uri = open_recipe(client, ws)
    reply = await execute(client, "trtls.findDivergence", {"uri": uri, "engine": "enc", "fix": True})
    await until(lambda: _token(client, "diverge", set()) is not None)
    token = _token(client, "diverge", set())
    assert token is not None
    await until(lambda: bool(_diagnostics(client, uri, "TRT981")), timeout=600)
    reports = [getattr(r, "message", "") or "" for r in client.progress_reports[token]]
    assert any(m.startswith("round 1: comparing every tensor") for m in reports), reports
    (found,) = _diagnostics(client, uri, "TRT981")
    assert recipe.read_text().splitlines()[found.range.start.line].strip() == "[engines.enc]"
    assert "from node proj_tiny (MatMul)" in found.message
    from trtls.triage.trt_layers_run import execution_blocker

    if execution_blocker() is not None:  # the engine's layers: never a verdict where no engine can run
        assert "TensorRT engine layers: not_checked: TensorRT execution unavailable here: " in found.message
    row = await _row(client, reply["divergenceId"])
    assert row["status"] == "done" and Path(row["evidencePath"]).is_file()

    actions = await client.text_document_code_action_async(
        lsp.CodeActionParams(
            text_document=lsp.TextDocumentIdentifier(uri=uri),
            range=found.range,
            context=lsp.CodeActionContext(diagnostics=[found]),
        )
    )
    (fix,) = [a for a in actions or [] if isinstance(a, lsp.CodeAction) and a.edit is not None]
    assert fix.title.startswith("Keep proj_tiny in its original precision"), fix.title
    assert fix.edit is not None and fix.edit.changes is not None
    recipe.write_text(_apply(recipe.read_text(), fix.edit.changes[uri]))
    edited = recipe.read_text()
    table = edited[edited.index("[engines.enc.precision]") :].split("\n\n")[0]
    assert 'exclude_nodes = ["proj_tiny"]' in table, edited
    assert load_recipe(recipe).engine("enc").precision.exclude_nodes == ["proj_tiny"]
