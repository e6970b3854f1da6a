"""`trtls.lock.json`: the digests of every checkpoint file per route. Written only by `trtls route lock`
(`lock_route`), after a person reviewed the files — like any lock file; gate 1 compares against it on every run and
never writes it (no trust on first use)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from trtls.core.paths import real
from trtls.fs import Kind, atomic_write_text, parse_json, read_text

LOCK_NAME = "trtls.lock.json"
LOCK_FORMAT = "trtls.lock/1"
LOCK_LIMIT = 64 * 1024 * 1024  # digests of every file of every route: large checkpoints have thousands of files


def _parsed(text: str) -> dict[str, Any] | None:
    """The lock's JSON when it is a lock (an object with a routes table), else None."""
    try:
        data = parse_json(text)
    except (ValueError, RecursionError):  # RecursionError: JSON nested deeper than the parser's stack
        return None
    return data if isinstance(data, dict) and isinstance(data.get("routes"), dict) else None


def read_lock(path: Path) -> dict[str, Any]:
    """The lock file, read bounded and only if it is a regular file (committed beside the recipe, it is read like
    the recipe: a symlink to one is followed; it is never written through one)."""
    try:
        data = _parsed(read_text(path, limit=LOCK_LIMIT, follow=True))
    except (OSError, ValueError):
        data = None
    return data if data is not None else {"format": LOCK_FORMAT, "routes": {}}


def write_lock_entry(path: Path, route_name: str, entry: dict[str, Any], *, within: Path | None = None) -> None:
    """Replace the route's entry, atomically, inside `within` (the recipe's real folder; None: the lock's own). A lock
    file that is there but is not a lock (a merge conflict, a truncated file) is never replaced: LockError, so the
    other routes' reviewed digests in it are not lost."""
    try:
        data = _parsed(read_text(path, limit=LOCK_LIMIT, follow=True))
    except FileNotFoundError:
        data = {"format": LOCK_FORMAT, "routes": {}}
    else:
        if data is None:
            raise LockError(
                f"{LOCK_NAME} is there but is not a trtls lock (not JSON with a routes table: a merge conflict, a "
                "truncated file?): it is unchanged; repair or remove it, then lock again"
            )
    data["format"] = LOCK_FORMAT
    data["routes"][route_name] = entry
    text = json.dumps(data, indent=2, sort_keys=True) + "\n"
    atomic_write_text(path, text, kind=Kind.route_artefact, within=within or real(path.parent))


def lock_entry(
    model_id: str | None, revision: str, commit: str | None, path: str, files: dict[str, Any]
) -> dict[str, Any]:
    return {
        "checkpoint": {"id": model_id, "revision": revision, "commit": commit, "path": path},
        "files": files,
        "lockedAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def lock_drift(entry: dict[str, Any], current: dict[str, dict[str, Any]]) -> dict[str, list[str]]:
    """Files whose digest changed, that were removed, and that were added since the entry was locked."""
    old = entry.get("files", {}) if isinstance(entry.get("files"), dict) else {}
    return {
        "changed": sorted(r for r in current if r in old and old[r].get("sha256") != current[r]["sha256"]),
        "removed": sorted(r for r in old if r not in current),
        "added": sorted(r for r in current if r not in old),
    }


class LockError(Exception):
    """The route's checkpoint cannot be locked as it is (revision not pinned, entries refused, layout problem)."""


def lock_route(loaded: Any, route_name: str, *, use_digest_cache: bool = True) -> dict[str, Any]:
    """`trtls route lock`: record the sha256 and size of every checkpoint file of the route (atomically)."""
    from trtls.checkpoint.hashing import DigestCache, default_cache_path, hash_files
    from trtls.checkpoint.layout import list_files, resolve_layout
    from trtls.core.route import COMMIT, route_model

    ck = route_model(loaded, route_name).source_checkpoint()
    if not COMMIT.match(ck.revision):
        raise LockError(f"revision '{ck.revision}' is not a pinned commit: pin it before locking")
    layout = resolve_layout(Path(loaded.base_dir) / ck.path, ck.revision, ck.id)
    if layout.problem is not None or layout.files_dir is None:
        raise LockError(f"checkpoint layout: {layout.problem or 'no files folder'}")
    files, refused = list_files(layout)
    if refused:
        raise LockError("entries refused (never followed): " + "; ".join(f"{r}: {why}" for r, why in refused))
    cache = DigestCache(default_cache_path(loaded.base_dir)) if use_digest_cache else None
    try:
        digests = hash_files([f.real for f in files], cache)
    except OSError as exc:  # a checkpoint file swapped for a FIFO, a device or a link since it was listed
        raise LockError(f"checkpoint file {exc.filename}: {exc.strerror or exc}") from None
    current = {f.rel: {"sha256": digests[f.real.absolute()].sha256, "size": f.size} for f in files}
    entry = lock_entry(ck.id, ck.revision, layout.commit or ck.revision, ck.path, current)
    try:
        write_lock_entry(Path(loaded.base_dir) / LOCK_NAME, route_name, entry, within=real(loaded.base_dir))
    except OSError as exc:  # a symlinked or unwritable lock file: refused, the file there unchanged
        raise LockError(f"{LOCK_NAME} cannot be written: {exc.strerror or exc}; it is unchanged") from None
    return entry
