"""What `trtls build --matrix` says of a stop once its cells have ended, and what the end of the matrix shows.

A stop once every cell was built still said `stopping every cell (cooperative; Ctrl-C again to force)…`, though no
cell was running: what it cut was a cell's upload of its engine to the remote store. Now the line says so, from the
same function a single build's stop is said by (`cli/store_lookup.stop_words`). And the matrix's end in the terminal
showed nothing of the store's warnings about a cell (`its upload was stopped (ctrl_c) and no record was sent`): they
were in the cell's evidence only. Now they are under the cell, one `warning:` line each, as a single build says its
store's.

Real processes: `trtls build --matrix` of the quickstart's `demo` with one cell and an empty local store, the loopback
remote of test_remote_push_stop_said.py stalling the engine's PUT and sending SIGINT from the thread that holds it."""

from __future__ import annotations

import signal
from pathlib import Path

from tests.store.helpers import summaries
from tests.store.scripted_remote import build_against_out
from tests.store.test_remote_push_stop_said import StalledRemote

ONE_CELL = """
[engines.demo.matrix]
output = "build/demo-{optimization_level}.engine"
optimization_level = [0]
"""


def test_a_stop_after_the_cells_ended_says_the_upload_and_the_end_shows_its_warning(
    workspace: Path, tmp_path: Path
) -> None:
    recipe = workspace / "trtls.toml"
    recipe.write_text(recipe.read_text() + ONE_CELL)
    remote = StalledRemote(signal.SIGINT)
    _, out, err = build_against_out(workspace, tmp_path / "store", remote, remote.build, "--matrix")
    assert remote.held.is_set(), f"the cell's engine was never sent: {err[-3000:]}"
    assert "Traceback" not in err, err[-3000:]

    (cell,) = [s for s in summaries(workspace) if s.get("kind") != "matrix"]
    assert cell["outcome"] == "built", cell
    name = f"demo/{cell['cell']}"
    said = f"{name} is built already; stopping the upload of its engine to the remote store {remote.url}"
    assert said in err and "cooperative" not in err, err[-3000:]

    warning = next(w for w in cell["store"]["warnings"] if "its upload was stopped (ctrl_c)" in w)
    lines = out.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith(f"  ✓ {cell['cell']} · "))  # the cell's line
    assert f"      warning: {warning}" in lines[at + 1 :], out
