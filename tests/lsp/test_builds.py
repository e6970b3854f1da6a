"""Builds through the real language server over stdio, with real TensorRT-RTX builds on the CPU."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types as lsp
from pytest_lsp import LanguageClient, make_test_lsp_client

from trtls.core import wire

from ..builds.helpers import process_gone
from .conftest import accept_refresh, caps
from .lsp_helpers import command_of, execute, open_recipe, plain, raw_progress_ends, until


def build_token(client: LanguageClient, engine: str) -> str | None:
    for token, reports in client.progress_reports.items():
        if reports and isinstance(reports[0], lsp.WorkDoneProgressBegin) and reports[0].title == f"Building {engine}":
            return str(token)
    return None


def ended(client: LanguageClient, token: str) -> bool:
    return any(isinstance(r, lsp.WorkDoneProgressEnd) for r in client.progress_reports.get(token, []))


async def test_build_progress_tree_and_evidence(client: LanguageClient, workspace: Path) -> None:
    trees: list[Any] = []
    client.feature("trtls/buildTree")(lambda params: trees.append(plain(params)))
    ends = raw_progress_ends(client)
    uri = open_recipe(client, workspace)
    res = await execute(client, "trtls.buildEngine", {"uri": uri, "engine": "demo"})
    assert res["status"] == "started" and res["buildId"].startswith("demo-")
    again = await execute(client, "trtls.buildEngine", {"uri": uri, "engine": "demo"})
    already = wire.BuildEngineReply(buildId=res["buildId"], engine="demo", status="already_building")
    assert again == wire.to_wire(already)
    await until(lambda: build_token(client, "demo") is not None)
    token = build_token(client, "demo")
    await until(lambda: ended(client, token))
    reports = client.progress_reports[token]
    begin, end = reports[0], reports[-1]
    assert begin.cancellable is True and begin.title == "Building demo"
    assert end.message.startswith("built in ")
    percents = [r.percentage for r in reports if getattr(r, "percentage", None) is not None]
    assert percents == sorted(percents) and percents[-1] == 100, "percentage never falls and ends at 100"
    middle = [r.message for r in reports[1:-1]]
    assert any("›" in m for m in middle), "reports carry the path of the deepest running phase"
    evidence = await execute(client, "trtls.showEvidence", {"buildId": res["buildId"]})
    summary = evidence["summary"]
    assert summary["outcome"] == "built" and Path(evidence["path"]).is_file()
    report = await execute(client, "trtls.buildReport", {"buildId": res["buildId"]})
    assert 'class="phase-bar" data-phase-id="0"' in report["html"]
    assert Path(report["path"]).read_text() == report["html"]
    await until(lambda: any(t.get("status") == "built" for t in trees))
    final = [t for t in trees if t["buildId"] == res["buildId"]][-1]
    assert final["status"] == "built" and final["uri"] == uri
    ids = [(p["id"], p["parentId"], p["name"], p["status"]) for p in final["phases"]]
    assert ids == [(p["id"], p["parentId"], p["name"], p["status"]) for p in summary["phaseTree"]]
    # the outcome, the stall rule and the folding are the server's data, sent to every face
    assert (final["outcome"], final["outcomeKind"], final["outcomeMessage"]) == ("built", "ok", end.message)
    assert ends[token] == {"kind": "end", "message": end.message, "outcome": "built", "outcomeKind": "ok"}
    assert all({"quietS", "stalled", "foldedInto"} <= set(p) for t in trees for p in t["phases"])
    running = [p for t in trees for p in t["phases"] if p["status"] == "running"]
    assert running and all(p["quietForS"] is not None and isinstance(p["stalled"], bool) for p in running)
    assert all(p["quietS"] is None and p["stalled"] is False for p in final["phases"]), "a finished build is not quiet"
    listed = await execute(client, "trtls.listBuilds", {})
    assert [b["status"] for b in listed["builds"] if b["buildId"] == res["buildId"]] == ["built"]
    lenses = await client.text_document_code_lens_async(lsp.CodeLensParams(lsp.TextDocumentIdentifier(uri)))
    assert "Evidence" in {lens.command.title for lens in lenses}


async def test_cancel_through_progress_token_is_ide_stop(client: LanguageClient, workspace: Path) -> None:
    uri = open_recipe(client, workspace)
    res = await execute(client, "trtls.buildEngine", {"uri": uri, "engine": "large"})
    await until(lambda: build_token(client, "large") is not None)
    token = build_token(client, "large")
    await until(lambda: any("›" in (getattr(r, "message", "") or "") for r in client.progress_reports[token]))
    lenses = await client.text_document_code_lens_async(lsp.CodeLensParams(lsp.TextDocumentIdentifier(uri)))
    assert any(lens.command.title == "■ Stop" for lens in lenses), "the lens turns into Stop while building"
    client.window_work_done_progress_cancel(lsp.WorkDoneProgressCancelParams(token=token))
    await until(lambda: ended(client, token))
    assert client.progress_reports[token][-1].message == "cancelled by ide_stop"
    assert not (workspace / "build" / "large.engine").exists()
    await until(lambda: any(d.code == "TRT201" for d in client.diagnostics.get(uri, [])))
    diags = {d.code: d for d in client.diagnostics[uri]}
    cancelled = diags["TRT201"]
    header = (workspace / "trtls.toml").read_text().splitlines().index("[engines.large]")
    assert cancelled.range.start.line == header and "ide_stop" in cancelled.message  # the [engines.large] header
    assert cancelled.severity == lsp.DiagnosticSeverity.Warning
    assert "TRT205" in diags and diags["TRT205"].severity == lsp.DiagnosticSeverity.Information
    assert "TRT401" in diags, "the cleanup result is shown"
    summary = (await execute(client, "trtls.showEvidence", {"buildId": res["buildId"]}))["summary"]
    assert summary["cancelSource"] == "ide_stop" and summary["cancelLatencyMs"] is not None
    # retry advice is one click away
    actions = await client.text_document_code_action_async(
        lsp.CodeActionParams(
            lsp.TextDocumentIdentifier(uri), diags["TRT205"].range, lsp.CodeActionContext(diagnostics=[diags["TRT205"]])
        )
    )
    assert {a.title for a in actions} >= {
        "Retry cold",
        "Retry with the timing cache",
        "Retry with a reduced tactic search (diagnosis)",
    }
    cold = next(a for a in actions if a.title == "Retry cold")
    name, arguments = command_of(cold)
    assert name == "trtls.buildEngine" and arguments[0]["retry"] == "cold"


async def test_cancel_build_command_is_api_and_success_clears(client: LanguageClient, workspace: Path) -> None:
    uri = open_recipe(client, workspace)
    res = await execute(client, "trtls.buildEngine", {"uri": uri, "engine": "demo"})
    await until(lambda: build_token(client, "demo") is not None)
    token = build_token(client, "demo")
    # at once: a demo build is ~0.5 CPU-s, so waiting for its phases first raced its end (ack accepted False in a
    # loaded CI run: the build had finished); the cancel's path is the same from the worker's start on
    ack = await execute(client, "trtls.cancelBuild", {"buildId": res["buildId"]})
    assert ack["accepted"] is True
    await until(lambda: ended(client, token))
    assert client.progress_reports[token][-1].message == "cancelled by api"
    await until(lambda: any(d.code == "TRT201" for d in client.diagnostics.get(uri, [])))
    # a successful rebuild clears this engine's build findings
    res2 = await execute(client, "trtls.buildEngine", {"uri": uri, "engine": "demo", "retry": "with_cache"})
    assert res2["status"] == "started"
    await until(lambda: not any(str(d.code).startswith("TRT2") for d in client.diagnostics.get(uri, [])))
    summary = (await execute(client, "trtls.showEvidence", {"buildId": res2["buildId"]}))["summary"]
    assert summary["outcome"] == "built" and any("retry (with_cache)" in n for n in summary["notes"])


async def test_corrupted_cache_warning_at_timing_cache_key(client: LanguageClient, workspace: Path) -> None:
    from trtls.builds.timing_cache import save_merged

    cache = workspace / "build" / "demo.timing-cache"
    save_merged(cache, b"ptrtd" + bytes(range(200)), {"any": "identity"}, lambda a, b: None)
    data = bytearray(cache.read_bytes())
    data[10] ^= 0xFF  # one flipped byte
    cache.write_bytes(bytes(data))
    uri = open_recipe(client, workspace)
    res = await execute(client, "trtls.buildEngine", {"uri": uri, "engine": "demo"})
    await until(lambda: any(d.code == "TRT301" for d in client.diagnostics.get(uri, [])))
    warning = next(d for d in client.diagnostics[uri] if d.code == "TRT301")
    assert warning.severity == lsp.DiagnosticSeverity.Warning
    key_line = next(
        i for i, s in enumerate((workspace / "trtls.toml").read_text().splitlines()) if s.startswith("timing_cache")
    )
    assert (warning.range.start.line, warning.range.start.character, warning.range.end.character) == (key_line, 0, 12)
    assert warning.message.startswith("timing cache quarantined") and "this build ran cold" in warning.message
    assert not cache.exists() and list((workspace / ".trtls" / "quarantine").iterdir())
    summary = (await execute(client, "trtls.showEvidence", {"buildId": res["buildId"]}))["summary"]
    assert summary["timingCacheMode"] == "quarantined" and summary["outcome"] == "built"


async def test_client_without_progress_gets_log_lines(plain_client: LanguageClient, workspace: Path) -> None:
    uri = open_recipe(plain_client, workspace)
    res = await execute(plain_client, "trtls.buildEngine", {"uri": uri, "engine": "demo"})
    await until(lambda: any("built in" in m.message for m in plain_client.log_messages))
    assert plain_client.progress_reports == {}
    lines = [m.message for m in plain_client.log_messages if "demo" in m.message]
    assert lines[0] == f"trtls: building demo ({res['buildId']})" and any("%)" in line for line in lines)


async def _start_server(cwd: Path | None = None) -> LanguageClient:
    client = make_test_lsp_client()
    accept_refresh(client)
    await client.start_io(sys.executable, "-m", "trtls", "serve")
    await client.initialize_session(
        lsp.InitializeParams(capabilities=caps(), initialization_options={"buildTree": True})
    )
    return client


async def test_shutdown_during_two_builds(workspace: Path) -> None:
    # Two long builds (a second `large` under another name), so neither can finish before the shutdown lands.
    recipe = workspace / "trtls.toml"
    text = recipe.read_text()
    large = text[text.index("[engines.large]") :]
    recipe.write_text(
        text + "\n" + large.replace("engines.large", "engines.large_b").replace("build/large.", "build/large_b.")
    )
    client = await _start_server()
    uri = open_recipe(client, workspace)
    a = await execute(client, "trtls.buildEngine", {"uri": uri, "engine": "large_b"})
    b = await execute(client, "trtls.buildEngine", {"uri": uri, "engine": "large"})
    await until(lambda: build_token(client, "large_b") and build_token(client, "large"))
    await until(lambda: all(len(client.progress_reports[build_token(client, e)]) > 1 for e in ("large", "large_b")))
    await client.shutdown_session()  # must answer cleanly (pygls #606) after stopping both builds
    for build_id in (a["buildId"], b["buildId"]):
        summary = json.loads((workspace / ".trtls" / "runs" / build_id / "summary.json").read_text())
        assert summary["cancelSource"] == "service_shutdown" and summary["outcome"] == "cancelled", summary["outcome"]
    assert not (workspace / "build" / "large.engine").exists() and not (workspace / "build" / "large_b.engine").exists()
    assert not [p for p in workspace.rglob("*") if ".trtls-tmp-" in p.name]


async def test_server_killed_mid_build_orphans_recovered_on_restart(workspace: Path) -> None:
    client = await _start_server()
    uri = open_recipe(client, workspace)
    res = await execute(client, "trtls.buildEngine", {"uri": uri, "engine": "large"})
    await until(lambda: build_token(client, "large") is not None)
    running = workspace / ".trtls" / "runs" / res["buildId"] / "running.json"
    await until(lambda: running.exists() and "workerPid" in running.read_text())
    worker_pid = json.loads(running.read_text())["workerPid"]
    await until(
        lambda: any(
            "›" in (getattr(r, "message", "") or "") for r in client.progress_reports[build_token(client, "large")]
        )
    )
    # leave an orphaned temp engine the way a crash mid-commit would
    orphan = workspace / "build" / f"large.engine.trtls-tmp-{res['buildId']}"
    orphan.parent.mkdir(parents=True, exist_ok=True)
    orphan.write_bytes(b"half an engine")
    os.kill(client._server.pid, signal.SIGKILL)
    await client._server.wait()
    client2 = await _start_server()
    try:
        open_recipe(client2, workspace)
        await until(lambda: any("whose supervising process died" in m.message for m in client2.messages))
        await until(lambda: any(d.code == "TRT404" for d in client2.diagnostics.get(uri, [])))
        summary = json.loads((workspace / ".trtls" / "runs" / res["buildId"] / "summary.json").read_text())
        assert summary["outcome"] == "killed" and not running.exists()
        from trtls.core.evidence import missing_seed_fields

        assert (
            missing_seed_fields(summary) == []
            and summary["buildConfigHash"]
            and summary["timingCacheMode"] == "discarded"
        )
        assert summary["phaseTree"] and all(p["status"] != "running" for p in summary["phaseTree"])
        assert not orphan.exists() and not (workspace / "build" / "large.engine").exists()
        await until(lambda: process_gone(worker_pid), timeout=30)
    finally:
        await client2.shutdown_session()


@pytest.mark.parametrize(
    "arg", [{"uri": "file:///nowhere/trtls.toml"}, {"engine": "demo"}, {"uri": 1, "engine": "demo", "x": 1}]
)
async def test_build_engine_bad_arguments(client: LanguageClient, arg: dict) -> None:
    from pygls.exceptions import JsonRpcInvalidParams

    with pytest.raises(JsonRpcInvalidParams, match=r"expected one argument object \{uri: str, engine: str"):
        await execute(client, "trtls.buildEngine", arg)


async def test_exit_without_shutdown_leaves_nothing_half_written(workspace: Path) -> None:
    client = await _start_server()
    uri = open_recipe(client, workspace)
    res = await execute(client, "trtls.buildEngine", {"uri": uri, "engine": "large"})
    running = workspace / ".trtls" / "runs" / res["buildId"] / "running.json"
    await until(lambda: running.exists() and "workerPid" in running.read_text())
    worker_pid = json.loads(running.read_text())["workerPid"]
    await until(lambda: len(client.progress_reports.get(build_token(client, "large") or "", [])) > 1)
    client.protocol.notify(lsp.EXIT, None)  # an editor that just goes away
    await asyncio.wait_for(client._server.wait(), 30)
    # the worker sees its stdin close, cancels itself (service_shutdown) and removes what it started
    await until(lambda: process_gone(worker_pid), timeout=60)
    assert not (workspace / "build" / "large.engine").exists()
    assert not [p for p in workspace.rglob("*") if ".trtls-tmp-" in p.name]
    client2 = await _start_server()
    try:
        open_recipe(client2, workspace)
        await until(lambda: (running.parent / "summary.json").exists())
        assert json.loads((running.parent / "summary.json").read_text())["outcome"] == "killed"
    finally:
        await client2.shutdown_session()


async def test_stop_button_cancel_is_ide_stop(client: LanguageClient, workspace: Path) -> None:
    uri = open_recipe(client, workspace)
    res = await execute(client, "trtls.buildEngine", {"uri": uri, "engine": "large"})
    lenses = await client.text_document_code_lens_async(lsp.CodeLensParams(lsp.TextDocumentIdentifier(uri)))
    stop = next(lens for lens in lenses if lens.command.title == "■ Stop")
    assert stop.command.command == "trtls.cancelBuild" and stop.command.arguments[0] == {
        "buildId": res["buildId"],
        "source": "ide_stop",
    }
    ack = await execute(client, "trtls.cancelBuild", stop.command.arguments[0])
    assert ack["accepted"] is True
    await until(lambda: build_token(client, "large") is not None and ended(client, build_token(client, "large")))
    assert client.progress_reports[build_token(client, "large")][-1].message == "cancelled by ide_stop"


async def test_print_debug_information_names_the_worker_builder(client: LanguageClient, workspace: Path) -> None:
    """The same block as `trtls info`, plus the server's own state; the builder is probed in a worker process
    (the server never imports TensorRT)."""
    info = await execute(client, "trtls.printDebugInformation", {})
    assert info["builder"]["module"] == "tensorrt_rtx" and info["pygls"] == "2.1.1"
    assert isinstance(info["serverPid"], int) and info["runningBuilds"] == []
    assert "builder: {" in info["text"] and "serverPid: " in info["text"]
    assert any("trtls: " in m.message for m in client.log_messages), "also logged to the client's output"
