"""The folder each write of a build must stay in (the `within` of `trtls.fs`), decided from what the recipe named when
it was loaded, never from where a path happens to lead at the moment of the write.

* Records under `<recipe>/.trtls/` (evidence, history, known-good records, locks, quarantine, the precision cache):
  the recipe's folder. The `.trtls` of a path is found by its text, not followed, so a `.trtls` or `.trtls/runs`
  swapped for a symlink since the recipe was checked leads out of that folder and the door refuses the write.
* An engine output: `judged_write_root` when the job is made (the recipe's real folder, or the real folder of an
  output that `allow_outside` lets out), and `loaded_write_root` for a restore, from the output as it was placed
  when the recipe was loaded. A folder that leads out without an `allow_outside` entry (swapped for a symlink
  since the check) is judged against the recipe's folder, so the write is refused, never followed.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any, BinaryIO

from trtls.core.paths import inside, place, real
from trtls.fs import Kind, atomic_write_text, ensure_folder, remove_tree
from trtls.fs.stream import open_stream

STATE_DIR = ".trtls"


def state_root(path: Path) -> Path:
    """The folder a record at `path` (under `<recipe>/.trtls/`) must stay in: the folder holding that `.trtls`,
    found by the path's text. A path with no `.trtls` in it (a tool's own folder) stays in its nearest existing
    folder (the missing ones are created below it by descriptor)."""
    for folder in (path, *path.parents):
        if folder.name == STATE_DIR:
            return folder.parent
    return nearest_folder(path.parent)


def nearest_folder(folder: Path) -> Path:
    """`folder`, or its nearest parent that exists: the `within` of a write whose caller names no root (the
    missing folders are then created by descriptor below it, never through a link)."""
    while not folder.is_dir() and folder != folder.parent:
        folder = folder.parent
    return folder


def write_record(path: Path, text: str) -> None:
    """Write a record under `<recipe>/.trtls/` atomically, its folders created by descriptor, inside the recipe's
    folder (`state_root`). Raises OSError (UnsafeWrite for a swapped `.trtls` or a symlinked record, ENOSPC, EROFS);
    `evidence_error` says it as TRT413."""
    root = state_root(path)
    made = not os.path.lexists(path.parent)
    ensure_folder(path.parent, within=root)
    try:
        atomic_write_text(path, text, kind=Kind.evidence, within=root)
    except OSError:
        if made:  # the run's folder this write made holds nothing: it goes too (no run without its record)
            with contextlib.suppress(OSError):
                remove_tree(path.parent, kind=Kind.evidence, within=root)
        raise


def evidence_error(exc: OSError, path: Path) -> str:
    """The located TRT413 line of a record that could not be written (the path first, then why)."""
    # the record's own path, always whole: the door works by descriptor, so `exc.filename` is often a bare name
    where = exc.filename if isinstance(exc.filename, str) and os.path.isabs(exc.filename) else path
    return f"TRT413 {where}: {exc.strerror or exc}; the record {path.name} was not written"


def open_record_stream(path: Path) -> BinaryIO:
    """A record written as it goes (a build's `events.jsonl`), unbuffered, inside the recipe's folder."""
    return open_stream(path, kind=Kind.evidence, within=state_root(path))


def loaded_write_root(recipe_folder: Path, judged: str | os.PathLike[str] | None) -> Path:
    """The write root of an output as it was judged when the recipe was loaded (the job's `write_root`, from
    `judged_write_root`): never judged again from where the output's folder leads now. Without a judged root, the
    recipe's real folder: an output folder swapped for a symlink leading out is then refused at the write, never
    taken as the root (an output `allow_outside` lets out always comes with its judged root)."""
    return Path(judged) if judged is not None else real(recipe_folder)


def judged_write_root(loaded: Any, output: Path) -> Path:
    """The write root of `output` as the path policy judges it now: the recipe's real folder, or the output's real
    folder when an `allow_outside` entry holds it. An output whose folder leads out and that no entry allows (a
    folder swapped for a symlink after the recipe's check) gets the recipe's folder, so its write is refused."""
    root = real(loaded.base_dir)
    folder = real(output.parent)
    if inside(folder, root):
        return root
    recipe = getattr(loaded, "recipe", None)
    for entry in getattr(recipe, "allow_outside", None) or []:
        try:
            allowed = real(place(loaded.base_dir, entry))
        except (ValueError, OSError):
            continue
        if inside(folder / output.name, allowed):  # the entry names the output or a folder holding it
            return folder
    return root
