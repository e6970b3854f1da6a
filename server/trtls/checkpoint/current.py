"""A checkpoint's content as it is now: every file's sha256 and size, hashed as gate 1 hashes them (the same
layout rules, through the digest cache `.trtls/digests.json`), and one digest of the whole (`files_digest`).

Gate 1 records `files_digest` in its summary; what a verdict rests on carries it (`gates.lifecycle.rested_on`), so
`trtls route status` sees a flipped weight bit or an edited README even when nobody re-locked the checkpoint."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any


def files_digest(current: dict[str, dict[str, Any]]) -> str:
    """The hex sha256 of every file's {sha256, size}, by relative path (gate 1's `files_digest`)."""
    return hashlib.sha256(json.dumps(current, sort_keys=True).encode()).hexdigest()


def checkpoint_files(
    recipe_dir: Path,
    path: str,
    revision: str,
    model_id: str | None,
    *,
    use_digest_cache: bool = True,
    cancel: Callable[[], bool] | None = None,
) -> dict[str, dict[str, Any]] | str:
    """rel → {sha256, size} of the checkpoint's files now, or why they cannot be read (the folder is gone, an entry
    is refused, a file cannot be hashed, the hashing was stopped by `cancel`)."""
    from trtls.checkpoint.hashing import DigestCache, HashCancelled, default_cache_path, hash_files
    from trtls.checkpoint.layout import list_files, resolve_layout

    folder = Path(recipe_dir) / path
    if not folder.is_dir():
        return f"the checkpoint folder {path} is not there"
    layout = resolve_layout(folder, revision, model_id)
    if layout.files_dir is None:
        return f"checkpoint layout: {layout.problem or 'no files folder'}"
    files, refused = list_files(layout)
    if refused:
        return "entries refused (never followed): " + "; ".join(f"{r}: {why}" for r, why in refused[:3])
    cache = DigestCache(default_cache_path(recipe_dir)) if use_digest_cache else None
    try:
        digests = hash_files([f.real for f in files], cache, cancel=cancel)
    except HashCancelled:
        return "not hashed: the run was stopped"
    except OSError as exc:
        return f"checkpoint file {exc.filename}: {exc.strerror or exc}"
    return {f.rel: {"sha256": digests[f.real.absolute()].sha256, "size": f.size} for f in files}


def changes_since_lock(recipe_dir: Path, route_name: str, current: dict[str, dict[str, Any]]) -> str | None:
    """The files that differ from the route's lock entry, in words ("changed: README.md; added: x.bin"), or None
    when there is no entry or nothing differs."""
    from trtls.checkpoint.lock import LOCK_NAME, lock_drift, read_lock

    entry = read_lock(Path(recipe_dir) / LOCK_NAME)["routes"].get(route_name)
    if not isinstance(entry, dict):
        return None
    drift = lock_drift(entry, current)
    parts = [
        f"{what}: {', '.join(names[:5])}{' …' if len(names) > 5 else ''}" for what, names in drift.items() if names
    ]
    return "; ".join(parts) or None
