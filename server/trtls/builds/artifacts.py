"""Files a build writes: the engine (temp → fsync → rename), quarantine, and the inventory.

A previous good engine at the output path is only ever replaced by a complete, fsynced new one;
a cancelled or failed build removes its temp file (or moves it to quarantine when the recipe keeps
evidence) and never touches the output.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from trtls.core.atomic import TEMP_MARK, atomic_writer, temp_path_for
from trtls.core.paths import checked_target
from trtls.core.sha256 import sha256_bytes, sha256_file


def inventory_entry(action: str, kind: str, path: Path, moved_to: Path | None = None) -> dict[str, Any]:
    existing = moved_to if moved_to is not None else path
    entry: dict[str, Any] = {"action": action, "kind": kind, "path": str(path)}
    if existing.is_file():
        entry["size"] = existing.stat().st_size
        entry["sha256"] = sha256_file(existing)
    if moved_to is not None:
        entry["moved_to"] = str(moved_to)
    return entry


def engine_temp_path(output: Path, build_id: str) -> Path:
    return temp_path_for(output, build_id)


def write_engine(
    output: Path,
    build_id: str,
    plan: memoryview | bytes,
    before_rename: Callable[[], None] | None = None,
    within: str | os.PathLike[str] | None = None,
) -> tuple[int, str]:
    """Write the serialized engine atomically, never through a symlink (`core.atomic`: the temp file is created
    O_EXCL | O_NOFOLLOW in the output's real folder and renamed there; a symlinked output raises UnsafeWrite).
    Raises OSError (disk full, read-only) with the temp removed. `before_rename`: called once the temp file is
    complete and fsynced, just before the rename; whatever it raises leaves the output untouched (the worker's
    last look at whether anyone still wants this engine). `within`: the job's `write_root` — the output's real
    folder must still be inside it (a folder swapped for a symlink leading out since the recipe was checked)."""
    output.parent.mkdir(parents=True, exist_ok=True)
    with atomic_writer(output, within=within, temp_name=engine_temp_path(output, build_id).name) as out:
        out.write(plan)
        if before_rename is not None:
            out.flush()
            os.fsync(out.fileno())  # the writer's own fsync is then nearly free: the rename follows the check at once
            before_rename()
    return len(plan), sha256_bytes(plan)


def quarantine(path: Path, quarantine_dir: Path, reason: str) -> Path:
    """Move a suspect file aside (never delete evidence someone may need), with a note of why."""
    quarantine_dir.mkdir(parents=True, exist_ok=True)
    dest = quarantine_dir / f"{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}-{path.name}"
    shutil.move(str(path), dest)
    dest.with_name(dest.name + ".reason.txt").write_text(reason + "\n", encoding="utf-8")
    return dest


def remove_or_quarantine(
    paths: Iterable[Path], quarantine_dir: Path | None, reason: str
) -> tuple[list[dict[str, Any]], str]:
    """Clean up partial files; returns (inventory, cleanup status)."""
    inventory: list[dict[str, Any]] = []
    status = "cleaned"
    for p in paths:
        if not p.exists():
            continue
        try:
            if quarantine_dir is not None:
                dest = quarantine(p, quarantine_dir, reason)
                inventory.append(inventory_entry("quarantined", "temp", p, dest))
                status = "quarantined"
            else:
                entry = inventory_entry("removed", "temp", p)
                p.unlink()
                inventory.append(entry)
        except OSError as exc:
            inventory.append({"action": "kept", "kind": "temp", "path": str(p), "error": str(exc)})
            status = "failed"
    return inventory, status


def temp_files_near(output: Path, build_id: str | None = None) -> list[Path]:
    """Temp files a build may have left beside its output (all builds when build_id is None)."""
    folder = output.parent
    if not folder.is_dir():
        return []
    prefix = f"{output.name}{TEMP_MARK}" + (build_id or "")
    return sorted(p for p in folder.iterdir() if p.name.startswith(prefix))


def output_unwritable(output: Path, build_id: str) -> str | None:
    """Why the engine could not be written to `output`'s folder, checked before the build spends its time;
    None when a file can be created and removed there. A real probe file, not os.access: root passes
    access() on an immutable folder or a read-only mount and fails only on the write."""
    probe = output.parent / f"{output.name}{TEMP_MARK}{build_id}.probe"
    try:
        output.parent.mkdir(parents=True, exist_ok=True)
        checked_target(output)  # a symlinked output is refused here, before any builder time
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
        fd = os.open(probe, flags, 0o600)  # never opens what is planted at the probe's name
        with os.fdopen(fd, "wb") as fh:
            fh.write(b"trtls write probe\n")
        probe.unlink()
    except OSError as exc:
        return f"{exc.strerror or exc} ({output.parent})"
    return None
