"""Files a build writes: the engine (temp → fsync → rename), quarantine, and the inventory.

A previous good engine at the output path is only ever replaced by a complete, fsynced new one;
a cancelled or failed build removes its temp file (or moves it to quarantine when the recipe keeps
evidence) and never touches the output.
"""

from __future__ import annotations

import errno
import os
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from trtls.builds.roots import nearest_folder, state_root
from trtls.core.paths import UnsafeWrite, checked_target
from trtls.core.sha256 import sha256_bytes, sha256_file
from trtls.core.vocabulary import CleanupStatus
from trtls.fs import (
    Kind,
    atomic_write_bytes,
    atomic_write_text,
    atomic_writer,
    ensure_folder,
    open_regular,
    remove_file,
    rename,
)
from trtls.fs.kinds import TEMP_MARK
from trtls.fs.write import temp_path_for


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
    """Write the serialized engine atomically through the door (`trtls.fs.atomic_writer`: the output's folder
    judged inside `within` and opened by descriptor without following a link, the temp file created O_EXCL |
    O_NOFOLLOW there and renamed there; a symlinked output raises UnsafeWrite). Raises OSError (disk full,
    read-only) with the temp removed. `before_rename`: called once the temp file is complete and fsynced, just
    before the rename; whatever it raises leaves the output untouched (the worker's last look at whether anyone
    still wants this engine). `within`: the job's `write_root` — the output's real folder must still be inside it
    (a folder swapped for a symlink leading out since the recipe was checked)."""
    root = Path(within) if within is not None else nearest_folder(output.parent)
    ensure_folder(output.parent, within=root)
    temp = engine_temp_path(output, build_id).name
    uncache_replaced(output, root)
    # The bytes' sha on a thread beside their write and fsync (hashlib releases the GIL): it was ~1.5 ms of a 2.5 MB
    # engine after them, on every build's way to build_finished, while a core waited for the disk (issue 31).
    digest: list[str] = []
    hashing = threading.Thread(target=lambda: digest.append(sha256_bytes(plan)), name="trtls-engine-sha", daemon=True)
    hashing.start()
    try:
        with atomic_writer(output, kind=Kind.engine_output, within=root, temp_name=temp) as out:
            out.write(plan)
            if before_rename is not None:
                out.flush()
                os.fsync(out.fileno())  # the writer's own fsync is then nearly free: the rename follows the check
                before_rename()
    finally:
        hashing.join()
    return len(plan), digest[0] if digest else sha256_bytes(plan)


def uncache_replaced(output: Path, root: Path) -> None:
    """Drop the page cache of the engine a new one is about to replace; its bytes stay on disk, untouched, and the
    rename frees its pages anyway. Writing into memory the kernel freed moments ago is fast, into memory untouched
    since is not where the host reclaims a guest's free memory: 138 MB (`large`) took ~30 ms against ~300 ms on this
    machine, a Firecracker guest (2026-12-05), and a bare script that truncates the old engine first paid the 30. A
    file that is not a regular one inside `root` (nothing there, a FIFO, a link) is left alone: only a hint is lost."""
    try:
        with open_regular(output, limit=None, follow=False, within=root) as old:
            os.posix_fadvise(old.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
    except (OSError, AttributeError):  # AttributeError: no posix_fadvise on this platform
        pass


def quarantine(path: Path, quarantine_dir: Path, reason: str, *, kind: Kind, within: Path | None = None) -> Path:
    """Move a suspect file aside (never delete evidence someone may need), with a note of why. `kind`: what the
    file is (an engine temp, a timing cache), whose names trtls may move; `within`: the folder it must be taken
    from (by default its own). The quarantine stays inside the recipe's folder (`.trtls/quarantine`, never through
    a `.trtls` swapped for a symlink); a file on another filesystem is copied there, then removed."""
    root = state_root(quarantine_dir)
    source_root = within if within is not None else path.parent
    folder = ensure_folder(quarantine_dir, within=root)
    dest = folder / f"{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}-{path.name}"
    try:
        rename(path, dest, kind=kind, within=root, replace=False)
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            raise
        _copy_aside(path, dest, kind, source_root, root)  # another folder tree or filesystem: copy, then remove
    atomic_write_text(dest.with_name(dest.name + ".reason.txt"), reason + "\n", kind=Kind.evidence, within=root)
    return dest


def _copy_aside(path: Path, dest: Path, kind: Kind, source_root: Path, root: Path) -> None:
    if not kind.may_delete(path.name):
        raise UnsafeWrite(errno.EPERM, f"is not a name trtls makes for a {kind.label}; it is left alone", str(path))
    with open_regular(path, limit=None) as src, atomic_writer(dest, kind=Kind.evidence, within=root) as out:
        while block := src.read(1 << 20):
            out.write(block)
    remove_file(path, kind=kind, within=source_root)


def remove_or_quarantine(
    paths: Iterable[Path], quarantine_dir: Path | None, reason: str, within: Path | None = None
) -> tuple[list[dict[str, Any]], CleanupStatus]:
    """Clean up an engine's partial files (names trtls made: `<output>.trtls-tmp-<build id>`); returns (inventory,
    cleanup status). `within`: the folder they must be taken from (the job's `write_root`; by default each one's
    own folder). Whatever cannot be removed is kept and said (`action: kept`), never a traceback."""
    inventory: list[dict[str, Any]] = []
    status: CleanupStatus = "cleaned"
    for p in paths:
        if not p.exists():
            continue
        root = within if within is not None else p.parent
        try:
            if quarantine_dir is not None:
                dest = quarantine(p, quarantine_dir, reason, kind=Kind.engine_output, within=root)
                inventory.append(inventory_entry("quarantined", "temp", p, dest))
                status = "quarantined"
            else:
                entry = inventory_entry("removed", "temp", p)
                remove_file(p, kind=Kind.engine_output, within=root)
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


def output_unwritable(output: Path, build_id: str, within: Path | None = None) -> str | None:
    """Why the engine could not be written to `output`'s folder, checked before the build spends its time;
    None when a file can be created and removed there. A real probe file, not os.access: root passes
    access() on an immutable folder or a read-only mount and fails only on the write. `within`: the job's
    `write_root` (a folder leading out of it is refused here, before any builder time)."""
    probe = output.parent / f"{output.name}{TEMP_MARK}{build_id}.probe"
    root = within if within is not None else nearest_folder(output.parent)
    try:
        ensure_folder(output.parent, within=root)
        checked_target(output, root)  # a symlinked output is refused here, before any builder time
        # a real write (a full disk refuses bytes, not an empty file), never through what is planted at its name
        atomic_write_bytes(probe, b"trtls write probe\n", kind=Kind.engine_output, within=root)
        remove_file(probe, kind=Kind.engine_output, within=root)
    except OSError as exc:
        return f"{exc.strerror or exc} ({exc.filename or output.parent})"
    return None
