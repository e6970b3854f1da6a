"""The files the gates touch: records read bounded (a summary, a baseline, an SBOM, a route build's record), and
the private scratch folders a gate copies bundles into and extracts artifacts to. The gates never write a user's
file; their own records (evidence, baseline, reports) are written by `gates.run` and `release.baseline` inside the
recipe's real folder."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from trtls.fs import Kind, parse_json, read_text, remove_tree, scratch_dir

RECORD_LIMIT = 64 * 1024 * 1024  # the most a record the gates read (a summary, an SBOM, a baseline) can hold


def read_json(path: str | Path, *, follow: bool = False, limit: int = RECORD_LIMIT) -> Any:
    """A JSON record's value, or None when it is missing, not a regular file (a FIFO, a device; a symlink unless
    `follow`), larger than `limit`, or not JSON: a bad record is no record, never a hang or a traceback."""
    try:
        return parse_json(read_text(path, limit=limit, follow=follow))
    except (OSError, ValueError, RecursionError):  # RecursionError: JSON nested deeper than the parser's stack
        return None


@contextlib.contextmanager
def scratch(prefix: str) -> Iterator[Path]:
    """A private folder (`fs.scratch_dir`: 0700, marked as trtls's) for one gate's copies and extracted artifacts,
    removed with everything in it when the block ends."""
    folder = scratch_dir(prefix=prefix)
    try:
        yield folder
    finally:
        with contextlib.suppress(OSError):
            remove_tree(folder, kind=Kind.scratch, within=folder.parent)
