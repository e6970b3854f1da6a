"""A stop of a matrix while one of its cells sends its engine to the remote store cuts that upload at once, as a single
build's upload is cut (tests/store/test_remote_push_ctrl_c.py).

A matrix's cells were published by the matrix's store listener (builds/avoidance/cells.py) on the event loop: the
upload held the loop, so the terminal's Ctrl-C of `trtls build --matrix` (and the editor's Stop of a matrix: the same
`MatrixBuild.cancel`) was not answered until the upload's whole bound had passed, and the record was sent after it.
Now each cell is published as a single build is (`lookup.attach`): on a thread its end awaits, cut through the cell's
`Build.stop_end_with` by the stop the matrix hands every cell.

Real processes and the server docs/store.md tells users to run: `trtls build --matrix` of the quickstart's `demo`
with two cells (built one at a time) and an empty local store, and nginx's WebDAV module behind the proxy of
test_remote_push_ctrl_c.py, which holds the first cell's engine PUT half sent, sends the command SIGINT from the
thread that holds it, and keeps back what comes next — until the command lets the connection go, or HOLD_S passes
(then it sends nginx the rest: what the old code waited for)."""

from __future__ import annotations

import hashlib
import signal
from pathlib import Path

from tests.store.helpers import entries, local_entry_whole, summaries
from tests.store.nginx_dav import DavServer
from tests.store.scripted_remote import build_against
from tests.store.test_remote_push_ctrl_c import HOLD_S, HoldingProxy, cut_put_left_nothing

TWO_CELLS = """
[engines.demo.matrix]
output = "build/demo-{optimization_level}.engine"
optimization_level = [0, 1]
"""


def test_a_stop_of_the_matrix_while_a_cell_sends_its_engine_cuts_the_upload(
    workspace: Path, nginx_dav: DavServer, tmp_path: Path
) -> None:
    recipe = workspace / "trtls.toml"
    recipe.write_text(recipe.read_text() + TWO_CELLS)
    proxy = HoldingProxy(nginx_dav.url, signal.SIGINT)
    store = tmp_path / "store"
    returncode, err = build_against(workspace, store, proxy, proxy.build, "--matrix")
    assert proxy.signalled.is_set(), f"no cell's engine was sent: {proxy.requests}\n{err[-3000:]}"
    assert proxy.let_go.is_set() and not proxy.sent_all.is_set(), (
        f"the cell sent its engine on after the stop (the proxy passed it to nginx after {HOLD_S:g} s)\n{err[-3000:]}"
    )

    # the matrix ended stopped: the cell that was sending its engine stands built, the other never started
    assert returncode == 130 and "Traceback" not in err, err[-3000:]
    records = summaries(workspace)
    (matrix,) = [s for s in records if s.get("kind") == "matrix"]
    assert matrix["outcome"] == "cancelled" and matrix["cancelSource"] == "ctrl_c", matrix
    assert sorted(c["outcome"] for c in matrix["cells"]) == ["built", "not_started"], matrix["cells"]
    (cell,) = [s for s in records if s.get("kind") != "matrix"]
    assert cell["outcome"] == "built" and cell["parentId"] == matrix["buildId"], cell
    key, sha = str(cell["engineKey"]), str(cell["engineArtifact"]["sha256"])
    assert hashlib.sha256(Path(cell["engineArtifact"]["path"]).read_bytes()).hexdigest() == sha
    # the cell says its upload was stopped, in its evidence
    said = (
        f"the engine was not sent to the remote store {proxy.url}: its upload was stopped (ctrl_c) and no record "
        "was sent; the engine is built and kept in the local store"
    )
    assert said in cell["store"]["warnings"], cell["store"]
    # its local store entry, whole, and nothing left half-written
    assert [e.name for e in entries(store)] == [key]
    local_entry_whole(store, key, sha)
    assert list((store / "tmp").iterdir()) == [], "a temp folder was left"

    # the remote: the engine's PUT cut, no record sent; nginx kept nothing of the half it was sent
    cut_put_left_nothing(proxy, nginx_dav, sha)
