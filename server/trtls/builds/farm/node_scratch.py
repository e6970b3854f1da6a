"""A farm node's scratch folder: the ONNX copies its cells were sent (by sha256) and its cells' job folders
(node side, and the side that started the node).

It lives under the system temp folder, one per Ray node (several test nodes share one /tmp), as long as its node:
when trtls started the node — the embedded instance of a `[cluster] address = "local"` run, a warm farm's head — the
process that started it removes the folder once the node has ended (`remove`). Each run of an embedded instance is a
new node: before, every run left its node's copy of the ONNX behind (a 500 MB model, 500 MB of /tmp per run). A node
of a cluster trtls did not start keeps its folder while it lives; nothing outside this module guesses whether another
node still runs. Plain Python, no Ray import.
"""

from __future__ import annotations

import contextlib
import tempfile
from pathlib import Path

from trtls import fs
from trtls.fs import Kind

FARM_FOLDER = "trtls-farm"


def node_scratch(node_id: str) -> Path:
    """The node's scratch folder (not created here)."""
    return Path(tempfile.gettempdir()) / FARM_FOLDER / node_id[:16]


def scratch_folder(folder: Path, scratch: Path) -> Path:
    """`folder` under a node's scratch, created inside the system temp folder (never through a symlink) and marked
    as trtls's — the nodes' folder too — so a job folder, or a node's whole scratch, is removed only from a folder
    trtls made."""
    fs.ensure_folder(scratch.parent, within=scratch.parents[1], mark="trtls farm nodes' scratch")
    return fs.ensure_folder(folder, within=scratch.parents[1], mark="trtls farm node scratch")


def remove(node_id: str) -> bool:
    """Remove the scratch of a node trtls started, once that node has ended; True when there was one. Never through
    a link, only from the nodes' folder trtls marked; a folder it cannot remove is left (the run's result stands)."""
    scratch = node_scratch(node_id)
    with contextlib.suppress(OSError):
        return fs.remove_tree(scratch, kind=Kind.scratch, within=scratch.parents[1], owned=True)
    return False
