"""The editor's rollback and lockRoute, over the real server on stdio, against a real recipe folder (real engines built
by `trtls build` with TensorRT-RTX, a real store, a real checkpoint):

- a TRT338 (a rollback's pin that cannot be served, nothing to roll back to) names the recipe it is about, located on
  its engine table (`file:line:col`), in the editor and in the terminal alike: a workspace may hold many recipes, and
  the editor's answer used to be a bare `TRT338 …`, the terminal's `trtls.toml: TRT338 error: …` (no line);
- a rollback of a recipe with errors is refused with each error located on its own key, the place `trtls rollback`
  prints (the editor's refusal used to be bare `CODE message` lines);
- a rollback or a lock run while the editor holds unsaved changes to the recipe acts on the saved file (what the
  terminal, CI and the next `trtls build` read) and says so; neither writes the recipe, so nothing typed is lost."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcInvalidParams
from pytest_lsp import LanguageClient

from .lsp_helpers import answering, execute, open_recipe

SAVED_REVISION = "d065c296e0fef52b015f4755c02dda4b3064c1d2"  # samples/route's route `tiny`


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _with_store(ws: Path, store: Path) -> Path:
    recipe = ws / "trtls.toml"
    recipe.write_text(recipe.read_text() + f'\n[store]\npath = "{store}"\nmode = "read_write"\n')
    return recipe


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "trtls", *args], capture_output=True, text=True, timeout=600)


def _type_unsaved(client: LanguageClient, uri: str, text: str) -> None:
    """What typing does: the open document's text changes, the file on disk does not."""
    client.text_document_did_change(
        lsp.DidChangeTextDocumentParams(
            text_document=lsp.VersionedTextDocumentIdentifier(uri=uri, version=2),
            content_changes=[lsp.TextDocumentContentChangeWholeDocument(text=text)],
        )
    )


async def test_a_pin_that_cannot_be_served_names_its_recipe_in_both_faces(
    client: LanguageClient, workspace: Path, tmp_path: Path
) -> None:
    recipe = _with_store(workspace, tmp_path / "store")
    pin = workspace / ".trtls" / "engines" / "demo.pin.json"
    pin.parent.mkdir(parents=True)
    pin.write_text("not a pin\n")
    why = (
        f"TRT338 the rollback's pin {pin} is not JSON (Expecting value: line 1 column 1 (char 0)): nothing was built "
        "over the rollback; trtls build --unpin builds the recipe's engine"
    )
    terminal = _cli("build", str(workspace), "--engine", "demo")
    said = f"{recipe}:6:1: {why.replace(' ', ' error: ', 1)}"  # as every finding the terminal prints
    assert terminal.returncode == 1 and said in terminal.stderr.splitlines(), terminal.stderr
    scripted = _cli("build", str(workspace), "--engine", "demo", "--json")
    errors = [json.loads(line) for line in scripted.stdout.splitlines() if line.startswith('{"type": "error"')]
    message = why.split(" ", 1)[1]
    assert scripted.returncode == 1 and errors == [
        {
            "type": "error",
            "code": "TRT338",
            "message": message,
            "severity": "error",
            "file": str(recipe),
            "line": 6,
            "col": 1,
        }
    ], scripted.stdout

    uri = open_recipe(client, workspace)
    reply = await execute(client, "trtls.buildEngine", {"uri": uri, "engine": "demo"})
    assert reply["status"] == "store_error" and reply["buildId"] is None
    assert reply["errors"] == [f"{recipe}:6:1: {why}"]  # [engines.demo], line 6 of the quickstart recipe


async def test_nothing_to_roll_back_to_names_its_recipe(
    client: LanguageClient, workspace: Path, tmp_path: Path
) -> None:
    recipe = _with_store(workspace, tmp_path / "store")
    terminal = _cli("rollback", "demo", str(workspace))
    said = f"{recipe}:6:1: TRT338 error: no earlier known-good engine of demo to roll back to"
    assert terminal.returncode == 1 and terminal.stderr.splitlines() == [said], terminal.stderr

    uri = open_recipe(client, workspace)
    with pytest.raises(JsonRpcInvalidParams) as failed:
        await execute(client, "trtls.rollbackEngine", {"uri": uri, "engine": "demo"})
    said = f"{recipe}:6:1: TRT338 no earlier known-good engine of demo to roll back to"
    assert failed.value.message == said
    assert failed.value.data == {"code": "TRT338", "errors": [said]}


async def test_a_rollback_of_a_recipe_with_errors_locates_each_error(
    client: LanguageClient, workspace: Path, tmp_path: Path
) -> None:
    """Two errors in the saved recipe, on two keys: the editor's refusal places each where `trtls rollback` (every
    terminal command's recipe check) places it — it used to be `TRT102 …; TRT102 …`, naming no file or line."""
    recipe = _with_store(workspace, tmp_path / "store")
    text = recipe.read_text().replace("optimization_level = 3\n", 'optimization_level = "3"\n', 1)
    recipe.write_text(text.replace("cancel_grace_s = 10\n", 'cancel_grace_s = "ten"\n', 1))
    terminal = _cli("rollback", "demo", str(workspace))
    grace = "TRT102 'cancel_grace_s' must be a number, not the string 'ten'"
    level = "TRT102 'optimization_level' must be an integer, not the string '3' (write 3 without quotes)"
    located = [f"{recipe}:10:18: {grace}", f"{recipe}:13:22: {level}"]  # in file order, each on its own value
    printed = [line.replace(" TRT102 ", " TRT102 error: ", 1) for line in located]  # the terminal says the severity
    assert terminal.returncode == 2 and terminal.stderr.splitlines() == printed, terminal.stderr

    uri = open_recipe(client, workspace)
    with pytest.raises(JsonRpcInvalidParams) as refused:
        await execute(client, "trtls.rollbackEngine", {"uri": uri, "engine": "demo"})
    assert refused.value.message == "; ".join(located), refused.value.message
    assert refused.value.data == {"code": "TRT102", "errors": located}


async def test_a_rollback_with_unsaved_changes_acts_on_the_saved_recipe_and_says_so(
    client: LanguageClient, workspace: Path, tmp_path: Path
) -> None:
    """Two real builds (the second with refit data: other bytes), then the buffer moves `output` without saving: the
    rollback restores the first engine to the saved recipe's output, pins it against the saved recipe's key (the next
    `trtls build` serves it) and says the open buffer was not used. Before, it acted on the unsaved text: nothing at
    its output, so it "rolled back" to the second build, the recipe's own engine, and pinned nothing."""
    recipe = _with_store(workspace, tmp_path / "store")
    output = workspace / "build" / "demo.engine"
    assert _cli("build", str(workspace), "--engine", "demo").returncode == 0
    first = json.loads((workspace / ".trtls" / "engines" / "demo.json").read_text())["builds"][-1]
    first_sha = _sha(output)
    level = "optimization_level = 3\n"
    recipe.write_text(recipe.read_text().replace(level, level + 'refit = "individual"\n'))  # other engine bytes
    assert _cli("build", str(workspace), "--engine", "demo").returncode == 0
    assert _sha(output) != first_sha
    saved = recipe.read_text()

    uri = open_recipe(client, workspace)
    _type_unsaved(client, uri, saved.replace('output = "build/demo.engine"', 'output = "build/unsaved.engine"'))
    reply = await execute(client, "trtls.rollbackEngine", {"uri": uri, "engine": "demo"})

    evidence = json.loads((workspace / ".trtls" / "runs" / reply["buildId"] / "summary.json").read_text())
    assert evidence["message"].startswith(f"rolled back to the engine of build {first['buildId']} (")
    assert reply["message"] == (
        f"{evidence['message']} — {recipe} has unsaved changes in the editor: the rollback used the saved file, not "
        "the open buffer (save, then run it again to use them)"
    )
    assert _sha(output) == first_sha and not (workspace / "build" / "unsaved.engine").exists()
    assert recipe.read_text() == saved, "the recipe is not written: what was typed stays in the buffer"
    after = _cli("build", str(workspace), "--engine", "demo")
    said = after.stdout + after.stderr
    assert after.returncode == 0 and f"demo: pinned to build {first['buildId']} by a rollback" in said, said
    assert _sha(output) == first_sha


async def test_a_lock_with_unsaved_changes_asks_about_the_saved_recipe(
    client: LanguageClient, route_sample: Path, tmp_path: Path
) -> None:
    """The buffer names another revision, unsaved: the question says the saved file is what is locked, and the lock
    records the saved revision (the one `trtls gates` reads beside it)."""
    ws = tmp_path / "ws"
    shutil.copytree(route_sample, ws, symlinks=True)
    recipe = ws / "trtls.toml"
    saved = recipe.read_text()
    asked = answering(client, "Lock these files")
    uri = open_recipe(client, ws)
    _type_unsaved(client, uri, saved.replace(SAVED_REVISION, "1" * 40))
    reply = await execute(client, "trtls.lockRoute", {"uri": uri, "route": "tiny"})
    assert asked == [
        "Record the checkpoint files of route 'tiny' as they are now in trtls.lock.json (only after reviewing them)? "
        f"{recipe} has unsaved changes in the editor: the lock is taken from the saved file, not the open buffer "
        "(save, then run it again to use them)."
    ]
    assert reply["locked"] is True and reply["files"]
    lock = json.loads((ws / "trtls.lock.json").read_text())
    assert lock["routes"]["tiny"]["checkpoint"]["revision"] == SAVED_REVISION
    assert recipe.read_text() == saved
