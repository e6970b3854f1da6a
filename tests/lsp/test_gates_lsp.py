"""trtls.runGates over real LSP: findings land at the exact key, with quick fixes (sample route variants)."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest_lsp
from lsprotocol import types as lsp
from pytest_lsp import ClientServerConfig, LanguageClient

from .conftest import SERVER, caps
from .lsp_helpers import answering, command_of, execute, open_recipe, raw_progress_ends, until


def line_of(ws: Path, needle: str, after: str) -> int:
    lines = (ws / "trtls.toml").read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == after)
    return next(i for i, line in enumerate(lines) if i > start and needle in line)


async def test_unpinned_revision_hold_at_value_with_pin_fix(client: LanguageClient, route_sample: Path) -> None:
    uri = open_recipe(client, route_sample)
    res = await execute(client, "trtls.runGates", {"uri": uri, "route": "unpinned", "gates": [1]})
    assert res["decision"] == "hold"
    diag = next(d for d in client.diagnostics[uri] if d.code == "TRT501")
    line = line_of(route_sample, 'revision = "main"', "[routes.unpinned]")
    text = (route_sample / "trtls.toml").read_text().splitlines()[line]
    assert diag.range.start.line == line and text[diag.range.start.character : diag.range.end.character] == '"main"'
    assert diag.severity == lsp.DiagnosticSeverity.Warning and "not a pinned commit" in diag.message
    actions = await client.text_document_code_action_async(
        lsp.CodeActionParams(lsp.TextDocumentIdentifier(uri), diag.range, lsp.CodeActionContext(diagnostics=[diag]))
    )
    pin = next(a for a in actions if a.title.startswith("Pin the revision to "))
    commit = pin.title.rsplit(" ", 1)[-1]
    assert len(commit) == 40 and pin.edit.changes[uri][0].new_text == f'"{commit}"'


def allowing_editor(client: LanguageClient) -> tuple[list[str], list[lsp.ApplyWorkspaceEditParams]]:
    """The editor's side of `trtls.allowLicense`: every question answered "Allow", every edit applied; (questions
    asked, edits sent)."""
    asked = answering(client, "Allow")
    applied: list[lsp.ApplyWorkspaceEditParams] = []

    @client.feature(lsp.WORKSPACE_APPLY_EDIT)
    def apply(params: lsp.ApplyWorkspaceEditParams) -> lsp.ApplyWorkspaceEditResult:
        applied.append(params)
        return lsp.ApplyWorkspaceEditResult(applied=True)

    return asked, applied


async def test_licence_reject_on_allow_list_and_confirmed_fix(client: LanguageClient, route_sample: Path) -> None:
    asked, applied = allowing_editor(client)

    ends = raw_progress_ends(client)
    uri = open_recipe(client, route_sample)
    res = await execute(client, "trtls.runGates", {"uri": uri, "route": "license", "gates": [1]})
    assert res["decision"] == "reject"
    assert [(e["message"], e["outcome"], e["outcomeKind"]) for e in ends.values()] == [
        (res["verdict"]["text"], "reject", "refused")
    ], "the progress end carries the decision as data, in the one verdict sentence"
    assert res["verdict"]["text"] == "route license: reject — see Problems"
    diag = next(d for d in client.diagnostics[uri] if d.code == "TRT507")
    assert diag.severity == lsp.DiagnosticSeverity.Error
    assert diag.range.start.line == line_of(route_sample, "allowed_licenses", "[routes.license]")
    actions = await client.text_document_code_action_async(
        lsp.CodeActionParams(lsp.TextDocumentIdentifier(uri), diag.range, lsp.CodeActionContext(diagnostics=[diag]))
    )
    allow = next(a for a in actions if a.title.startswith("Allow licence 'apache-2.0'"))
    name, arguments = command_of(allow)
    assert name == "trtls.allowLicense"
    out = await execute(client, "trtls.allowLicense", arguments[0])
    assert out == {"applied": True} and "route 'license'" in asked[0]
    assert applied[0].edit.changes[uri][0].new_text == '["mit", "apache-2.0"]'


async def test_gate_diagnostics_do_not_wipe_recipe_or_other_routes(client: LanguageClient, route_sample: Path) -> None:
    uri = open_recipe(client, route_sample)
    await execute(client, "trtls.runGates", {"uri": uri, "route": "unpinned", "gates": [1]})
    await execute(client, "trtls.runGates", {"uri": uri, "route": "pickle", "gates": [1]})
    codes = {d.code for d in client.diagnostics[uri]}
    assert {"TRT501", "TRT509"} <= codes, "each route keeps its own findings"
    lenses = await client.text_document_code_lens_async(lsp.CodeLensParams(lsp.TextDocumentIdentifier(uri)))
    assert sum(1 for lens in lenses if lens.command.title == "▶ Run Gates") == 7


async def test_missing_lock_holds_and_its_quick_fix_runs_route_lock_after_confirmation(
    client: LanguageClient, route_sample: Path, tmp_path: Path
) -> None:
    """The gates never write trtls.lock.json: a route with no lock entry holds (TRT512), and the quick fix runs
    `trtls.lockRoute` (what `trtls route lock` does), which asks first; a later drift holds again."""
    ws = tmp_path / "ws"
    shutil.copytree(route_sample, ws, symlinks=True)
    (ws / "trtls.lock.json").unlink(missing_ok=True)
    asked = answering(client, "Lock these files")
    uri = open_recipe(client, ws)

    def lock_status(result: dict) -> str:
        return next(c["status"] for c in result["checks"] if c["name"] == "lock")

    first = await execute(client, "trtls.runGates", {"uri": uri, "route": "tiny", "gates": [1]})
    assert lock_status(first) == "hold" and not (ws / "trtls.lock.json").exists()  # no trust on first use
    missing = next(d for d in client.diagnostics[uri] if d.code == "TRT512")
    actions = await client.text_document_code_action_async(
        lsp.CodeActionParams(
            lsp.TextDocumentIdentifier(uri), missing.range, lsp.CodeActionContext(diagnostics=[missing])
        )
    )
    lock = next(a for a in actions if a.title.startswith("Lock the checkpoint files"))
    name, arguments = command_of(lock)
    assert name == "trtls.lockRoute" and arguments[0]["route"] == "tiny"
    out = await execute(client, name, arguments[0])
    assert out["locked"] is True and "trtls.lock.json" in asked[0] and (ws / "trtls.lock.json").is_file()
    res = await execute(client, "trtls.runGates", {"uri": uri, "route": "tiny", "gates": [1]})
    assert lock_status(res) == "pass"
    assert not any(d.code == "TRT512" for d in client.diagnostics[uri]), "the lock finding is gone once locked"
    snapshot = next((ws / "checkpoints" / "models--trtls--tiny-mlp" / "snapshots").iterdir())
    (snapshot / "NOTICE.txt").write_text("an addition nobody reviewed\n")
    res = await execute(client, "trtls.runGates", {"uri": uri, "route": "tiny", "gates": [1]})
    assert lock_status(res) == "hold"
    assert "NOTICE.txt" in next(d for d in client.diagnostics[uri] if d.code == "TRT512").message


async def test_cancel_of_the_gates_progress_stops_the_run_without_a_decision(
    client: LanguageClient, route_sample: Path, tmp_path: Path
) -> None:
    """Stop on the gates toast: a checkpoint with a 1 TiB sparse file keeps gate 1 hashing for ~30 min, so
    the run can only end early through the cancel (no timing race)."""
    ws = tmp_path / "ws"
    shutil.copytree(route_sample, ws)
    ck = ws / "checkpoints" / "slow"
    ck.mkdir(parents=True)
    (ck / "config.json").write_text('{"model_type": "mlp"}\n')
    (ck / "README.md").write_text("---\nlicense: apache-2.0\n---\n# a checkpoint that takes long to hash\n")
    with open(ck / "huge.dat", "wb") as fh:
        fh.truncate(2**40)
    with open(ws / "trtls.toml", "a") as fh:
        fh.write(
            '\n[routes.slow]\nengine = "tiny"\n'
            'checkpoint = { path = "checkpoints/slow", id = "trtls/slow", revision = '
            '"0000000000000000000000000000000000000001" }\n'
            'intended_use = "a gates run to cancel"\nallowed_licenses = ["apache-2.0"]\nbundle = "build/slow.bundle"\n'
        )
    ends = raw_progress_ends(client)
    uri = open_recipe(client, ws)
    run = asyncio.ensure_future(execute(client, "trtls.runGates", {"uri": uri, "route": "slow"}))

    def gates_token() -> str | None:
        for token, reports in client.progress_reports.items():
            if reports and isinstance(reports[0], lsp.WorkDoneProgressBegin) and reports[0].title == "Gates slow":
                return str(token)
        return None

    await until(
        lambda: (
            gates_token() is not None
            and any("gate 1" in (getattr(r, "message", "") or "") for r in client.progress_reports[gates_token()])
        )
    )
    token = gates_token()
    assert client.progress_reports[token][0].cancellable is True
    client.window_work_done_progress_cancel(lsp.WorkDoneProgressCancelParams(token=token))
    res = await asyncio.wait_for(run, 120)
    assert res["stopped"] is True
    end = client.progress_reports[token][-1]
    # the progress end reads the one verdict sentence the reply carries (core.display.gates_verdict)
    assert isinstance(end, lsp.WorkDoneProgressEnd) and end.message == res["verdict"]["text"]
    assert end.message == "route slow: gates cancelled — no decision"
    assert (ends[token]["outcome"], ends[token]["outcomeKind"]) == ("cancelled", "cancelled")
    summary = json.loads((ws / ".trtls" / "routes" / "slow" / "summary.json").read_text())
    assert summary["cancelled"] is True


async def test_a_gates_run_is_in_the_registry_and_cancel_build_stops_it_by_id(
    client: LanguageClient, route_sample: Path, tmp_path: Path
) -> None:
    """Gates runs share the registry of runs (issue 18 §3): listBuilds shows the running one, cancelBuild takes its
    id like a build's (same 1 TiB sparse checkpoint as above, so only the cancel can end it early)."""
    ws = tmp_path / "ws"
    shutil.copytree(route_sample, ws)
    ck = ws / "checkpoints" / "slow"
    ck.mkdir(parents=True)
    (ck / "config.json").write_text('{"model_type": "mlp"}\n')
    (ck / "README.md").write_text("---\nlicense: apache-2.0\n---\n# a checkpoint that takes long to hash\n")
    with open(ck / "huge.dat", "wb") as fh:
        fh.truncate(2**40)
    with open(ws / "trtls.toml", "a") as fh:
        fh.write(
            '\n[routes.slow]\nengine = "tiny"\n'
            'checkpoint = { path = "checkpoints/slow", id = "trtls/slow", revision = '
            '"0000000000000000000000000000000000000001" }\n'
            'intended_use = "a gates run to cancel"\nallowed_licenses = ["apache-2.0"]\nbundle = "build/slow.bundle"\n'
        )
    uri = open_recipe(client, ws)
    run = asyncio.ensure_future(execute(client, "trtls.runGates", {"uri": uri, "route": "slow"}))
    rows: list[dict] = []

    async def gates_rows() -> list[dict]:
        return [b for b in (await execute(client, "trtls.listBuilds", {}))["builds"] if b.get("kind") == "gates"]

    for _ in range(600):
        rows = await gates_rows()
        if rows:
            break
        await asyncio.sleep(0.1)
    (row,) = rows
    assert (row["engine"], row["status"], row["uri"]) == ("slow", "running", uri)
    ack = await execute(client, "trtls.cancelBuild", {"buildId": row["buildId"]})
    assert ack["accepted"] is True
    res = await asyncio.wait_for(run, 120)
    assert res["stopped"] is True and res["runId"] == row["buildId"]
    (after,) = await gates_rows()
    assert after["status"] == "cancelled" and after["cancelSource"] == "api"


@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER))
async def counting_client(lsp_client: LanguageClient):
    """An editor that counts the server's workspace/codeLens/refresh requests (VS Code then asks for new lenses)."""
    lsp_client.lens_refreshes = 0  # type: ignore[attr-defined]

    @lsp_client.feature(lsp.WORKSPACE_CODE_LENS_REFRESH)
    def refresh(params: None) -> None:
        lsp_client.lens_refreshes += 1  # type: ignore[attr-defined]

    await lsp_client.initialize_session(lsp.InitializeParams(capabilities=caps()))
    yield
    await lsp_client.shutdown_session()


async def test_a_gates_run_in_a_terminal_reaches_the_lens_through_a_watched_file(
    counting_client: LanguageClient, route_sample: Path, tmp_path: Path
) -> None:
    """`trtls gates` (or `trtls route promote`) in a terminal writes a record the editor does not edit: the client's
    file watcher reports it (workspace/didChangeWatchedFiles), the server checks the recipe again and asks the
    editor for new lenses, so the route's lens shows the new decision without the recipe being touched (issue 20)."""
    from trtls.lsp.watched_files import recipe_of

    client = counting_client
    ws = tmp_path / "ws"
    shutil.copytree(route_sample, ws, ignore=shutil.ignore_patterns(".trtls"))
    assert recipe_of(ws / ".trtls" / "routes" / "license" / "summary.json") == ws / "trtls.toml"
    assert recipe_of(ws / "trtls.promotions.jsonl") == ws / "trtls.toml" and recipe_of(ws / "other.json") is None
    uri = open_recipe(client, ws)

    async def titles() -> list[str]:
        lenses = await client.text_document_code_lens_async(lsp.CodeLensParams(lsp.TextDocumentIdentifier(uri)))
        return [lens.command.title for lens in lenses or [] if lens.command]

    await until(lambda: uri in client.diagnostics and client.lens_refreshes >= 1)  # type: ignore[attr-defined]
    before = client.lens_refreshes  # type: ignore[attr-defined]
    assert not any(t.startswith("last gates:") for t in await titles())
    done = subprocess.run(
        [sys.executable, "-m", "trtls", "gates", str(ws), "--route", "license", "--gate", "1"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode != 0, done.stdout  # reject
    summary = ws / ".trtls" / "routes" / "license" / "summary.json"
    client.workspace_did_change_watched_files(
        lsp.DidChangeWatchedFilesParams(changes=[lsp.FileEvent(summary.as_uri(), lsp.FileChangeType.Created)])
    )
    await until(lambda: client.lens_refreshes > before)  # type: ignore[attr-defined]
    assert any(t.startswith("last gates: reject (gates 1) · ") for t in await titles())


async def test_allow_licence_sends_only_the_edit_it_asked_about(client: LanguageClient, route_sample: Path) -> None:
    """The allow list was written by pasting quotes around each entry: an entry holding `\\"` came out unclosed (the
    recipe no longer parsed), a licence `x", "gpl-3.0` became two licences, a newline could start a new table; and a
    route written as an inline table got its list as a top-level key below it, the route's own list unchanged — each
    answered `applied: true`. Now every entry is a TOML string, and the edit is read back before it is sent: the
    route's list must be the one asked for and nothing else may change, else a located error and no edit."""
    _, applied = allowing_editor(client)

    import tomllib

    from trtls.core.tomlpos import apply_edits

    text = (
        (route_sample / "trtls.toml")
        .read_text()
        .replace(
            'allowed_licenses = ["mit"]\nbundle = "build/license.bundle"',
            'allowed_licenses = ["a\\"b", "mit"]\nbundle = "build/license.bundle"',
        )
    )
    text += '\n[routes]\ninline_r = { engine = "tiny", intended_use = "y" }\n'
    uri = (route_sample / "trtls.toml").as_uri()
    client.text_document_did_open(
        lsp.DidOpenTextDocumentParams(lsp.TextDocumentItem(uri=uri, language_id="toml", version=1, text=text))
    )
    hostile = 'x", "gpl-3.0\n[engines.pwn]'
    out = await execute(client, "trtls.allowLicense", {"uri": uri, "route": "license", "license": hostile})
    assert out == {"applied": True}
    (edit,) = applied[-1].edit.changes[uri]
    r = edit.range
    after = tomllib.loads(
        apply_edits(
            text, [{"range": [r.start.line, r.start.character, r.end.line, r.end.character], "newText": edit.new_text}]
        )
    )
    assert after["routes"]["license"]["allowed_licenses"] == ['a"b', "mit", hostile]  # one licence, as asked
    assert "pwn" not in after.get("engines", {})
    sent = len(applied)
    try:
        await execute(client, "trtls.allowLicense", {"uri": uri, "route": "inline_r", "license": "mit"})
        raise AssertionError("an edit that would not change the inline route's list was sent")
    except Exception as exc:  # the command's located refusal (-32602)
        assert "add the licence by hand" in str(exc), exc
    assert len(applied) == sent
