"""The editor's Stop (`trtls.cancelBuild`) of a build, or of a matrix, whose engine is still being sent to the remote
store cuts that upload and says so (docs/store.md, "A stop while the engine is sent"; trtls.app.stop).

A build's upload runs after the build has its outcome (builds/supervisor/build_end.py awaits the store's publish). The
editor asked `running` first: a Stop then answered `accepted: false` ("no longer running") and cut nothing, and the
upload ran on to its bound, then sent the record. A matrix's Stop cut its cells' uploads, but answered not accepted
when no cell was waiting any more. Now the reply says what the stop cut — the build, the upload of its engine to the
remote store, or nothing — and the same stop the terminal's Ctrl-C sends cuts the upload at once: no record is sent,
the engine and its local store entry are whole, the evidence and a warning line say the upload was stopped. A Stop once
everything has ended says nothing was left to stop.

The real server over stdio, a real TensorRT-RTX build of the quickstart's `demo`, and a loopback remote
(`StalledRemote`, tests/store/test_remote_push_stop_said.py) that holds no entry and stalls an engine's PUT half read,
until the build lets the connection go or HOLD_S (240 s) passes. The Stop is sent once the remote's thread holds the
PUT."""

from __future__ import annotations

import asyncio
import hashlib
import json
import socket
from pathlib import Path
from typing import Any

from lsprotocol import types as lsp
from pytest_lsp import LanguageClient

from tests.lsp.lsp_helpers import execute, finished, open_recipe, record_trees, until
from tests.store.helpers import entries, local_entry_whole, with_store
from tests.store.scripted_remote import Request, content_length
from tests.store.test_remote_push_stop_said import StalledRemote

LET_GO_S = 60  # the upload must end within this after the Stop: far short of the remote's own hold (240 s)

TWO_CELLS = """
[engines.demo.matrix]
output = "build/demo-{optimization_level}.engine"
optimization_level = [0, 1]
"""


class SecondPutStalled(StalledRemote):
    """StalledRemote, but the first engine PUT is taken whole (201) and its record too: the second engine's PUT (a
    matrix's second cell, the last: no cell is waiting any more) is the one held."""

    def __init__(self) -> None:
        self.engine_puts = 0
        super().__init__()

    def answer(self, conn: socket.socket, request: Request) -> None:
        record = "/ac/" in request.line
        if request.line.startswith("PUT ") and (record or self.engine_puts == 0):
            self.engine_puts += 0 if record else 1
            got, length = len(request.body), content_length(request.head)
            while got < length:
                chunk = conn.recv(1 << 16)
                if not chunk:
                    return
                got += len(chunk)
            conn.sendall(b"HTTP/1.1 201 Created\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            return
        super().answer(conn, request)


def _summary(ws: Path, build_id: str) -> dict[str, Any]:
    return dict(json.loads((ws / ".trtls" / "runs" / build_id / "summary.json").read_text()))


async def _held(remote: StalledRemote) -> None:
    """The engine's PUT is held by the remote's thread (a bound for something that must happen: the build)."""
    assert await asyncio.to_thread(remote.held.wait, 600), f"no engine was sent: {remote.requests}"


async def _started(
    client: LanguageClient, ws: Path, store: Path, remote: StalledRemote, command: str, arg: dict[str, Any]
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The local store `store` with `remote` as its remote store, the recipe opened and `command` sent for it: every
    `trtls/buildTree` row from then on, and the command's reply."""
    with_store(ws, store, remote=remote.url)
    trees = record_trees(client)
    uri = open_recipe(client, ws)
    return trees, await execute(client, command, {"uri": uri, **arg})


async def _stop(client: LanguageClient, build_id: str) -> dict[str, Any]:
    return dict(await execute(client, "trtls.cancelBuild", {"buildId": build_id, "source": "ide_stop"}))


async def _cut_and_ended(remote: StalledRemote, trees: list[dict[str, Any]], build_id: str) -> None:
    """The held upload let go soon after the Stop, and the run then ended with its evidence."""
    assert await asyncio.to_thread(remote.let_go.wait, LET_GO_S), "the upload went on after the Stop"
    await until(lambda: finished(trees, build_id), timeout=300)


async def _nothing_left(client: LanguageClient, build_id: str, message: str) -> None:
    """A Stop once the run has ended: not accepted, nothing stopped, and it says so (`message`)."""
    again = await _stop(client, build_id)
    assert again["accepted"] is False and again["stopped"] == "nothing", again
    assert again["message"] == message, again


def _stopped_line(remote: StalledRemote) -> str:
    return (
        f"the engine was not sent to the remote store {remote.url}: its upload was stopped (ide_stop) and no record "
        "was sent; the engine is built and kept in the local store"
    )


UPLOAD_STOPPED = "; its upload to the remote store was stopped (ide_stop): the engine is kept in the local store"


def _said_at_the_end(trees: list[dict[str, Any]], summary: dict[str, Any], cut: bool) -> None:
    """The evidence says how the upload ended, and the build's last row says the Stop cut it (before, the row said
    only `built in …`: the cut upload was a log line)."""
    upload = summary["store"]["upload"]
    last = [t for t in trees if t["buildId"] == summary["buildId"]][-1]
    if cut:
        assert upload == {"phase": "done", "reason": "stopped (ide_stop): no record was sent", "stoppedBy": "ide_stop"}
        assert last["outcomeMessage"].startswith("built in ") and last["outcomeMessage"].endswith(UPLOAD_STOPPED)
    else:
        assert upload == {"phase": "done", "reason": "sent", "stoppedBy": None}, upload
        assert "upload" not in last["outcomeMessage"], last


def _built_and_kept(ws: Path, store: Path, summary: dict[str, Any]) -> None:
    """The build stands: built, its engine in place as recorded, its local store entry whole."""
    assert summary["outcome"] == "built" and summary.get("cancelSource") is None, summary
    key, sha = str(summary["engineKey"]), str(summary["engineArtifact"]["sha256"])
    assert hashlib.sha256(Path(summary["engineArtifact"]["path"]).read_bytes()).hexdigest() == sha
    assert key in [e.name for e in entries(store)]
    local_entry_whole(store, key, sha)
    assert list((store / "tmp").iterdir()) == [], "a temp folder was left"


async def test_the_stop_of_a_built_build_cuts_its_upload_and_says_so(
    client: LanguageClient, workspace: Path, tmp_path: Path
) -> None:
    remote = StalledRemote()
    store = tmp_path / "store"
    try:
        trees, started = await _started(client, workspace, store, remote, "trtls.buildEngine", {"engine": "demo"})
        assert started["status"] == "started", started
        bid = started["buildId"]
        await _held(remote)

        stop = await _stop(client, bid)
        assert stop["accepted"] is True and stop["stopped"] == "upload" and stop["status"] == "built", stop
        assert stop["message"] == (
            f"demo is built already; stopping the upload of its engine to the remote store {remote.url} "
            "(the engine stays)"
        ), stop
        await _cut_and_ended(remote, trees, bid)

        summary = _summary(workspace, bid)
        assert _stopped_line(remote) in summary["store"]["warnings"], summary["store"]
        said = [m.message for m in client.log_messages if m.type == lsp.MessageType.Warning]
        assert f"trtls: demo: {_stopped_line(remote)}" in said, said
        _built_and_kept(workspace, store, summary)
        _said_at_the_end(trees, summary, cut=True)
        assert not [r for r in remote.requests if r.startswith("PUT ") and "/ac/" in r], remote.requests

        await _nothing_left(client, bid, "nothing left to stop: demo has ended (built)")
    finally:
        remote.stop()


async def test_the_stop_of_a_matrix_whose_last_cell_sends_its_engine_cuts_that_upload_and_says_so(
    client: LanguageClient, workspace: Path, tmp_path: Path
) -> None:
    recipe = workspace / "trtls.toml"
    recipe.write_text(recipe.read_text() + TWO_CELLS)
    remote = SecondPutStalled()
    store = tmp_path / "store"
    try:
        trees, started = await _started(
            client, workspace, store, remote, "trtls.buildMatrix", {"engine": "demo", "matrix": True}
        )
        assert started["status"] == "started" and len(started["cells"]) == 2, started
        mid, last = started["buildId"], started["cells"][1]["cell"]  # the cells build one after the other
        await _held(remote)

        stop = await _stop(client, mid)
        assert stop["accepted"] is True and stop["stopped"] == "upload", stop
        assert stop["message"] == (
            f"demo matrix: stopping the upload of {last}'s engine to the remote store {remote.url} (the engine stays)"
        ), stop
        await _cut_and_ended(remote, trees, mid)

        matrix = _summary(workspace, mid)
        assert [c["outcome"] for c in matrix["cells"]] == ["built", "built"], matrix["cells"]
        first, second = (_summary(workspace, c["buildId"]) for c in matrix["cells"])
        assert _stopped_line(remote) in second["store"]["warnings"], second["store"]
        assert not any("stopped" in w for w in first["store"]["warnings"]), first["store"]  # sent whole before
        said = [m.message for m in client.log_messages if m.type == lsp.MessageType.Warning]
        assert f"trtls: {last}: {_stopped_line(remote)}" in said, said
        for cell in (first, second):
            _built_and_kept(workspace, store, cell)
        _said_at_the_end(trees, first, cut=False)
        _said_at_the_end(trees, second, cut=True)
        records = [r.split()[1] for r in remote.requests if r.startswith("PUT ") and "/ac/" in r]
        assert records == [f"/cache/ac/{first['engineKey']}"], remote.requests  # none for the cut cell

        await _nothing_left(client, mid, f"nothing left to stop: demo matrix has ended ({matrix['outcome']})")
    finally:
        remote.stop()


async def test_the_stop_of_a_matrix_while_its_first_cell_sends_its_engine_stops_the_matrix_and_that_upload(
    client: LanguageClient, workspace: Path, tmp_path: Path
) -> None:
    """The first cell's engine held: the second cell is still waiting, so the stop stops the matrix (it never
    starts) and cuts the first cell's upload — the reply says both."""
    recipe = workspace / "trtls.toml"
    recipe.write_text(recipe.read_text() + TWO_CELLS)
    remote = StalledRemote()
    store = tmp_path / "store"
    try:
        trees, started = await _started(
            client, workspace, store, remote, "trtls.buildMatrix", {"engine": "demo", "matrix": True}
        )
        assert started["status"] == "started" and len(started["cells"]) == 2, started
        mid, first = started["buildId"], started["cells"][0]["cell"]
        await _held(remote)

        stop = await _stop(client, mid)
        assert stop["accepted"] is True and stop["stopped"] == "run" and stop["status"] == "stopping", stop
        assert stop["message"] == (
            f"stopping demo matrix; stopping the upload of {first}'s engine to the remote store {remote.url} "
            "(the engine stays)"
        ), stop
        await _cut_and_ended(remote, trees, mid)

        matrix = _summary(workspace, mid)
        assert matrix["outcome"] == "cancelled" and matrix["cancelSource"] == "ide_stop", matrix
        assert [c["outcome"] for c in matrix["cells"]] == ["built", "not_started"], matrix["cells"]
        cell = _summary(workspace, matrix["cells"][0]["buildId"])
        assert _stopped_line(remote) in cell["store"]["warnings"], cell["store"]
        _built_and_kept(workspace, store, cell)
        assert not [r for r in remote.requests if r.startswith("PUT ") and "/ac/" in r], remote.requests

        await _nothing_left(client, mid, "nothing left to stop: demo matrix has ended (cancelled)")
    finally:
        remote.stop()
