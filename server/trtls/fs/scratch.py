"""Scratch space trtls makes for itself: a private folder (0700, marked OWNED_MARK) or file under the system temp
folder or a folder the caller names. Removing it later goes through `fs.remove_tree(kind=Kind.scratch)`."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from trtls.fs.kinds import OWNED_MARK


def scratch_dir(prefix: str = "trtls-", parent: str | os.PathLike[str] | None = None) -> Path:
    """A new private folder (mkdtemp: 0700, a fresh name) marked as trtls's."""
    path = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    fd = os.open(path / OWNED_MARK, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    os.write(fd, b"scratch\n")
    os.close(fd)
    return path


def scratch_file(suffix: str = "", prefix: str = "trtls-", parent: str | os.PathLike[str] | None = None) -> Path:
    """A new private empty file (mkstemp: 0600, O_EXCL)."""
    fd, name = tempfile.mkstemp(suffix=suffix, prefix=prefix, dir=parent)
    os.close(fd)
    return Path(name)
