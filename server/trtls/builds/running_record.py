"""`running.json`: what a live build leaves on disk for whoever finds it after its supervising process died.

Written by the supervisor when a build starts (and again when the worker exists and when the previous engine's
sha is known), removed when the summary is written. Orphan recovery (builds/orphans.py) reads it: who supervised
the build (a `trtls build` in a terminal or a language server — the record names the real cause of a kill), which
worker to stop, and what the output was before the build, so the recovered record can say whether the engine on
disk is the old one or a new one this build renamed over it.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from trtls.core.atomic import atomic_write_text

OWNER_KINDS = {"build": "trtls build (CLI)", "serve": "language server", "accept": "trtls accept (CLI)"}


def process_owner(kind: str | None = None) -> dict[str, Any]:
    """Who this process is, for the records it leaves: `{kind, pid, command}`. The kind comes from the
    subcommand this process runs (`trtls build`, `trtls serve`) unless the caller names it."""
    argv = sys.argv
    sub = argv[1] if len(argv) > 1 else ""
    guessed = OWNER_KINDS.get(sub) or f"python process ({Path(argv[0]).name if argv else '?'})"
    return {"kind": kind or guessed, "pid": os.getpid(), "command": " ".join(argv[:8])[:300]}


def output_state(output: Path) -> dict[str, Any]:
    """The output as it is now, without following a final symlink: enough to tell later whether it was replaced
    (a rename always brings a new inode; trtls never writes an engine in place)."""
    try:
        st = os.lstat(output)
    except FileNotFoundError:
        return {"exists": False}
    except OSError as exc:
        return {"exists": None, "error": exc.strerror or str(exc)}
    return {"exists": True, "dev": st.st_dev, "inode": st.st_ino, "size": st.st_size, "mtimeNs": st.st_mtime_ns}


def write_running(evidence_dir: Path, record: dict[str, Any]) -> None:
    atomic_write_text(evidence_dir / "running.json", json.dumps(record))


def replaced_since(before: dict[str, Any] | None, now: dict[str, Any]) -> bool | None:
    """Was the output replaced since `before` was taken? None when that cannot be told (no record, unreadable)."""
    if not before or before.get("exists") is None or now.get("exists") is None:
        return None
    if not before["exists"]:
        return bool(now["exists"])
    if not now["exists"]:
        return True
    return (before["dev"], before["inode"], before["mtimeNs"]) != (now["dev"], now["inode"], now["mtimeNs"])
