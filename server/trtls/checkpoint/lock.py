"""`trtls.lock.json`: the digests of every checkpoint file per route, written when a route is first pinned (or
on `--update-lock`) and compared on every later run."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from trtls.core.atomic import atomic_write_text

LOCK_NAME = "trtls.lock.json"
LOCK_FORMAT = "trtls.lock/1"


def read_lock(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {"format": LOCK_FORMAT, "routes": {}}
    if not isinstance(data, dict) or not isinstance(data.get("routes"), dict):
        return {"format": LOCK_FORMAT, "routes": {}}
    return data


def write_lock_entry(path: Path, route_name: str, entry: dict[str, Any]) -> None:
    data = read_lock(path)
    data["format"] = LOCK_FORMAT
    data["routes"][route_name] = entry
    atomic_write_text(path, json.dumps(data, indent=2, sort_keys=True) + "\n")


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
