"""A stop of a matrix while a farm node looks its cell's key up in the remote store cuts that lookup at once.

Before anything builds, the node's host looks the key up itself (builds/farm/node_store.py `look_up_on_node`, run by
`node_host.NodeHost.open`). It ran before the cell was registered on the host, so no stop could reach it: the
driver's cancel line waited for `open` to answer, and a remote that stalled its answer held the cell for the lookup's
whole bound (30 s) after the person pressed Ctrl-C. Now the cell is registered first and its cancel state on the node
(`cell_runner.CellRun.stop`, the one that cuts the node's upload: tests/farm/test_farm_node_push_stop.py) is the
lookup's too (`Store.stop`); the driver sends the cancel to the host while the cell is being opened.

On the real two-node test cluster, a real `trtls build --matrix` of one cell, and a loopback remote (a socket server
of this test): the driver's own lookup of the key is answered 404 at once; the node's — the second request for the
record — is held: the server sends the command its SIGINT from the thread that holds it (no reading of the child's
output), then trickles the answer's first bytes, a byte a second (each wait under the 5 s a read waits), until the
node lets the connection go, or 20 s pass (then it answers 404: what the old code waited for, and then built)."""

from __future__ import annotations

import select
import signal
import socket
import sys
import threading
import time
from pathlib import Path

from tests.farm.conftest import LABEL
from tests.farm.test_farm_remote_store import ONE_CELL, forget_node_stores
from tests.farm.test_farm_store import _recipe
from tests.store.helpers import summaries, with_store
from tests.store.scripted_remote import ScriptedServer, SignalledBuild, run_signalled

HOLD_S = 20.0  # what the remote holds the node's lookup for before it answers (under the cell's 30 s grace)
NOT_FOUND = b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"


class StallsTheNodesLookup(SignalledBuild):
    """The first request for the key's record (the driver's) answered 404; the next (the node's) held: the command's
    SIGINT, then the 404's bytes one a second until the node cuts the connection, or all of them after HOLD_S."""

    def __init__(self) -> None:
        super().__init__()
        self.records_asked = 0
        self.signalled = threading.Event()
        self.let_go = threading.Event()  # the node cut the connection before the remote answered
        self.answered = threading.Event()  # the remote answered after HOLD_S: the node waited it out

    def __call__(self, line: str, conn: socket.socket) -> None:
        if " /cache/ac/" not in line:
            conn.sendall(NOT_FOUND if line.startswith(("GET ", "HEAD ")) else b"HTTP/1.1 201 Created\r\n\r\n")
            return
        self.records_asked += 1
        if self.records_asked == 1:
            conn.sendall(NOT_FOUND)  # the driver's lookup, before it places the cell: a miss
            return
        self.signal_the_build(signal.SIGINT)  # the person's Ctrl-C, while the node's lookup waits for its answer
        self.signalled.set()
        rest = NOT_FOUND
        until = time.monotonic() + HOLD_S
        try:
            while time.monotonic() < until:
                readable, _, _ = select.select([conn], [], [], 1.0)
                if readable and not _recv_or_reset(conn):
                    self.let_go.set()
                    return
                conn.sendall(rest[:1])
                rest = rest[1:]
            conn.sendall(rest)
            self.answered.set()
        except (BrokenPipeError, ConnectionResetError):
            self.let_go.set()


def _recv_or_reset(conn: socket.socket) -> bytes:
    try:
        return conn.recv(1 << 16)
    except ConnectionResetError:
        return b""


def stopped_during_the_nodes_lookup(
    ws: Path, store: Path, server: ScriptedServer, answer: StallsTheNodesLookup
) -> dict:
    """`trtls build --matrix` of the one cell in `ws`, given its SIGINT while its node's lookup is held: the lookup was
    cut (the node let the connection go before the remote answered), the command ended 130, the matrix and its cell
    `cancelled` by the Ctrl-C, nothing built or written. The cell's record."""
    cmd = [sys.executable, "-m", "trtls", "build", str(ws), "--engine", "demo", "--matrix"]
    returncode, out, err = run_signalled(cmd, server, answer, timeout=900)
    assert answer.signalled.is_set(), f"the node never looked the key up: {server.requests}\n{out}\n{err[-3000:]}"
    assert answer.let_go.is_set() and not answer.answered.is_set(), (
        f"the node's lookup waited for the remote after the matrix was stopped (answered after {HOLD_S:g} s)\n"
        f"{err[-3000:]}"
    )
    assert returncode == 130 and "Traceback" not in out + err, out + err[-3000:]
    records = summaries(ws)
    (matrix,) = [s for s in records if s.get("kind") == "matrix"]
    assert matrix["outcome"] == "cancelled" and matrix["cancelSource"] == "ctrl_c", matrix
    (cell,) = [s for s in records if s.get("cell")]
    assert cell["outcome"] == "cancelled" and cell["cancelSource"] == "ctrl_c", cell
    assert not (ws / "build").exists() or list((ws / "build").iterdir()) == [], "an engine was written"
    assert [r.split()[0] for r in server.requests] == ["GET", "GET"], server.requests  # no PUT, no further lookup
    assert not list((store / "entries").glob("*")), "a local entry was written"
    return cell


def test_a_ctrl_c_of_the_matrix_cuts_the_nodes_stalled_lookup_and_builds_nothing(ray_cluster, tmp_path: Path) -> None:
    answer = StallsTheNodesLookup()
    server = ScriptedServer(answer)
    ws = tmp_path / "ws"
    path = _recipe(ws, ray_cluster.address, f'{{ "{LABEL}" = "{{compute_capabilities}}" }}')
    path.write_text(path.read_text() + ONE_CELL)
    with_store(ws, tmp_path / "store", remote=server.url)
    forget_node_stores()  # a node's folder that held the key would ask the remote for its record only
    cell = stopped_during_the_nodes_lookup(ws, tmp_path / "store", server, answer)
    # it ended on its node, before any worker
    said = [n for n in cell["notes"] if n.startswith("cancelled while its node looked its key up in the remote store")]
    assert said, cell["notes"]
