"""A stop of a matrix while a farm node sends its cell's engine to the remote store cuts that upload at once.

A node publishes the engine its worker built itself (builds/farm/node_store.py), before the cell's `build_finished`
goes back to the driver. That upload had no cancel state: a Ctrl-C of the matrix sent the cell's cancel line to the
node, which wrote it to a worker that had already built (it stops nothing then), and the upload went on to its bound
(60 s and the engine's size at 4 MiB/s), then sent the record. Now the cell has a cancel state on its node
(`cell_runner.CellRun.stop`: the driver's cancel line, its stdin closed, the cell's end) and the node's push runs with
it as the store's (`Store.stop`), the way a CLI build's own push is cut (tests/store/test_remote_push_ctrl_c.py).

On the real two-node test cluster and a real nginx WebDAV server, behind the proxy of that test: it passes every
request on but holds the engine's `PUT` half sent, sends the real `trtls build --matrix` its SIGINT from the thread
that holds it (no reading of the child's output), then keeps back what comes — until the node lets the connection
go, or 20 s pass (then it passes the rest to nginx: what the old code waited for). The cell's grace is 30 s, so no
escalation (which kills the node's actor) cuts the upload first. One cell only: the machine has 2 cores."""

from __future__ import annotations

import re
import signal
import socket
import sys
from pathlib import Path

from tests.farm.conftest import LABEL
from tests.farm.test_farm_remote_store import ONE_CELL, forget_node_stores
from tests.farm.test_farm_store import _recipe
from tests.store.helpers import summaries, with_store
from tests.store.nginx_dav import DavServer, nginx_dav  # noqa: F401  (a fixture: a real nginx WebDAV server)
from tests.store.scripted_remote import run_signalled
from tests.store.test_remote_push_ctrl_c import HOLD_S, HoldingProxy


def test_a_ctrl_c_of_the_matrix_cuts_the_nodes_upload_and_sends_no_record(
    ray_cluster,
    nginx_dav: DavServer,  # noqa: F811
    tmp_path: Path,
) -> None:
    proxy = HoldingProxy(nginx_dav.url, signal.SIGINT)
    ws = tmp_path / "ws"
    path = _recipe(ws, ray_cluster.address, f'{{ "{LABEL}" = "{{compute_capabilities}}" }}')
    path.write_text(path.read_text() + ONE_CELL)
    with_store(ws, tmp_path / "store")
    path.write_text(path.read_text() + f'remote = "{proxy.url}"\n')
    forget_node_stores()  # a node's folder that held the key would find its blob on the remote unsent
    cmd = [sys.executable, "-m", "trtls", "build", str(ws), "--engine", "demo", "--matrix"]
    _, out, err = run_signalled(cmd, proxy, proxy.build, timeout=900)
    assert proxy.signalled.is_set(), f"the node never sent the engine: {proxy.requests}\n{out}\n{err[-3000:]}"
    assert proxy.let_go.is_set() and not proxy.sent_all.is_set(), (
        f"the node sent its engine on after the matrix was stopped (the proxy passed it to nginx after {HOLD_S:g} s)"
    )
    assert "Traceback" not in out + err, out + err

    (cell,) = [s for s in summaries(ws) if s.get("cell")]
    node = f"{socket.gethostname()} ({cell['node']['nodeId'][:12]})"
    said = (
        f"not published from node {node}: the engine was not sent to the remote store {proxy.url}: its upload was "
        "stopped (ctrl_c) and no record was sent; the engine is built and kept in the local store"
    )
    assert said in cell["notes"], cell["notes"]
    assert not any(n.startswith("published to the remote store from node") for n in cell["notes"]), cell["notes"]

    # the remote: the node's engine PUT cut, no record asked for — by the node or by the driver after it
    puts = [line.split()[1] for line in proxy.requests if line.startswith("PUT ")]
    assert [p for p in puts if "/ac/" in p] == [], proxy.requests
    assert len(puts) == 1 and "/cas/" in puts[0], proxy.requests
    files = nginx_dav.files
    assert not (files / "ac").exists() or list((files / "ac").iterdir()) == [], "a record was sent"
    assert not re.search(r'PUT /cache/cas/\w+ HTTP/1\.1" 20[014]', nginx_dav.access_log()), nginx_dav.access_log()
