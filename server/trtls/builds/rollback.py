"""Roll an engine back to an earlier known-good build: its store entry restored to the output atomically (verified
by sha256 on the way), recorded as evidence (`outcome: rolled_back`) like any build (docs/store.md)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from trtls import __version__
from trtls.builds.artifacts import sha256_file
from trtls.builds.build import new_build_id, state_dir, worker_job
from trtls.builds.reuse import OutputHeld, ago
from trtls.core.atomic import atomic_write_text
from trtls.core.paths import UnsafeWrite, write_root
from trtls.store.config import store_config
from trtls.store.entries import Refused, Store
from trtls.store.known_good import KnownGood


class RollbackError(Exception):
    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code


def rollback_target(loaded: Any, engine: str, to: str | None) -> dict[str, Any]:
    """The known-good record to restore: `to`, else the newest one whose engine is not the one at the output."""
    records = KnownGood(state_dir(loaded.path), engine).records()
    if to is not None:
        rec = next((r for r in reversed(records) if r.get("buildId") == to), None)
        if rec is None:
            raise RollbackError("TRT338", f"no successful build {to} of {engine} is recorded (see trtls engines)")
        return rec
    output = Path(worker_job(loaded, engine, "rollback")["output"])
    current = sha256_file(output) if output.is_file() else None
    rec = next((r for r in reversed(records) if r.get("sha256") != current), None)
    if rec is None:
        raise RollbackError("TRT338", f"no earlier known-good engine of {engine} to roll back to")
    return rec


def rollback(loaded: Any, engine: str, to: str | None = None) -> dict[str, Any]:
    rec = rollback_target(loaded, engine, to)
    config = store_config(loaded.recipe.store, loaded.base_dir)
    if config is None:
        raise RollbackError("TRT338", "the engine store is off: known-good engines are kept in the store")
    store = Store(config.path, config.mode, config.max_size)
    try:
        entry = store.get(str(rec["key"]))
    except Refused as exc:
        raise RollbackError("TRT334", str(exc)) from exc
    if entry is None:
        raise RollbackError("TRT338", f"the engine of build {rec.get('buildId')} is no longer in the store (evicted)")
    build_id = new_build_id(engine)
    output = Path(worker_job(loaded, engine, build_id)["output"])
    t0 = time.time()
    held = OutputHeld(state_dir(loaded.path), output, build_id, engine)
    if not held.take():
        raise RollbackError("TRT338", f"a build of {engine} is writing {output} now: roll back when it ends")
    try:
        store.restore(entry, output, build_id, within=write_root(loaded.path.parent, output))
    except Refused as exc:
        raise RollbackError("TRT332", str(exc)) from exc
    except UnsafeWrite as exc:
        raise RollbackError("TRT118", f"{exc.filename}: {exc.strerror}; nothing was restored") from exc
    finally:
        held.release()
    summary = {
        "framework": "trtls",
        "trtlsVersion": __version__,
        "buildId": build_id,
        "engine": engine,
        "recipe": str(loaded.path),
        "outcome": "rolled_back",
        "rolledBackTo": {k: rec.get(k) for k in ("buildId", "startedAt", "key", "sha256", "size")},
        "engineKey": rec.get("key"),
        "engineArtifact": {
            "action": "restored",
            "kind": "engine",
            "path": str(output),
            "size": entry.size,
            "sha256": entry.sha256,
        },
        "validationStatus": "pending",
        "startedAt": t0,
        "durationS": round(time.time() - t0, 3),
        "workerPid": None,
        "message": f"rolled back to the engine of build {rec.get('buildId')} ({ago(rec.get('startedAt'))})",
    }
    evidence = state_dir(loaded.path) / "runs" / build_id
    evidence.mkdir(parents=True, exist_ok=True)
    atomic_write_text(evidence / "summary.json", json.dumps(summary, indent=2, default=str))
    return summary
