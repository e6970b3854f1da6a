"""Roll an engine back to an earlier known-good build: its store entry restored to the output atomically (verified
by sha256 on the way), recorded as evidence (`outcome: rolled_back`) like any build (docs/store.md)."""

from __future__ import annotations

import errno
import json
import os
import time
from pathlib import Path
from typing import Any

from trtls import __version__
from trtls.builds.artifacts import sha256_file
from trtls.builds.avoidance.reuse import OutputHeld
from trtls.builds.roots import evidence_error, write_record
from trtls.builds.supervisor.job import new_build_id, state_dir, worker_job
from trtls.core.display import ago
from trtls.core.evidence import runbook_without_worker
from trtls.core.paths import UnsafeWrite
from trtls.core.terminal_text import terminal_safe
from trtls.store.config import store_config
from trtls.store.entries import NotTrusted, Refused, RestoreFailed, Store
from trtls.store.folder import StoreUnusable
from trtls.store.known_good import KnownGood, Pin, uncorroborated


class RollbackError(Exception):
    def __init__(self, code: str, message: str):
        # it quotes a build id the person (or a client) typed: escaped once here for the terminal and the editor
        super().__init__(terminal_safe(message, keep_newlines=False))
        self.code = code


def rollback_target(loaded: Any, engine: str, to: str | None) -> dict[str, Any]:
    """The known-good record to restore: `to`, else the newest known-good build OLDER than the one whose engine is at
    the output (by when each was built), so a second rollback goes further back, never forward; an output no record
    describes rolls back to the newest one that is not its engine. A TRT338 names the known-good record when it was
    refused (a symlink, a FIFO, too large: `KnownGood.problem`)."""
    known = KnownGood(state_dir(loaded.path), engine)
    records = known.records()
    refused = f"; the known-good record was not read: {known.problem}" if known.problem else ""
    if to is not None:
        rec = next((r for r in reversed(records) if r.get("buildId") == to), None)
        if rec is None:
            why = f"no successful build {to} of {engine} is recorded (see trtls engines){refused}"
            raise RollbackError("TRT338", why)
        return rec
    output = Path(worker_job(loaded, engine, "rollback")["output"])
    try:  # the output's folder may be swapped or gone while looking: then no engine is known to be there
        current = sha256_file(output) if output.is_file() else None
    except OSError:
        current = None
    rec = _older_than_output(records, current, Pin(state_dir(loaded.path), engine).read())
    if rec is None:
        raise RollbackError("TRT338", f"no earlier known-good engine of {engine} to roll back to{refused}")
    return rec


def _when(record: dict[str, Any]) -> float:
    t = record.get("startedAt")
    return float(t) if isinstance(t, (int, float)) else 0.0


def _older_than_output(
    records: list[dict[str, Any]], current: str | None, pin: dict[str, Any] | None
) -> dict[str, Any] | None:
    """The newest record built before the build whose engine is at the output (its pin's build when the output
    holds the pinned engine, else the newest record of those bytes), whose engine is another one."""
    at_output = [r for r in records if current is not None and r.get("sha256") == current]
    if pin is not None and pin.get("sha256") == current:
        at_output = [r for r in at_output if r.get("buildId") == pin.get("buildId")] or at_output
    if not at_output:
        return next((r for r in reversed(records) if r.get("sha256") != current), None)
    since = max(_when(r) for r in at_output)
    older = [r for r in records if _when(r) < since and r.get("sha256") != current]
    return max(older, key=_when) if older else None


def rollback(loaded: Any, engine: str, to: str | None = None, via: str = "trtls rollback") -> dict[str, Any]:
    """Restore `rec`'s engine and pin it (`store.known_good.Pin`): the next `trtls build` serves it while the recipe's
    key is the one it has now. Rolling back to the recipe's own key removes the pin instead. `via`: who asked (the
    terminal, the editor), recorded in the pin."""
    rec = rollback_target(loaded, engine, to)
    config = store_config(loaded.recipe.store, loaded.base_dir)
    if config is None:
        raise RollbackError("TRT338", "the engine store is off: known-good engines are kept in the store")
    store = Store.from_config(config)  # its trust, its signing key, the recipe's folder
    try:
        if os.path.lexists(store.root):  # judged as a build judges it (a store that is not there holds nothing)
            store.check()
        entry = store.get(str(rec["key"]))
    except StoreUnusable as exc:  # "evicted" would be a false reason: the store itself cannot be used
        raise RollbackError(exc.code, str(exc)) from exc
    except NotTrusted as exc:
        raise RollbackError("TRT340", str(exc)) from exc
    except Refused as exc:
        raise RollbackError("TRT334", str(exc)) from exc
    if entry is None:
        raise RollbackError("TRT338", f"the engine of build {rec.get('buildId')} is no longer in the store (evicted)")
    forged = uncorroborated(loaded.path, state_dir(loaded.path), engine, rec, entry.build)
    if forged is not None:
        raise RollbackError("TRT338", f"the known-good record of build {rec.get('buildId')} {forged}: nothing restored")
    if entry.sha256 != rec["sha256"]:  # the key leads to bytes not this build's
        raise RollbackError(
            "TRT338",
            f"the store's entry for the key of build {rec.get('buildId')} holds another engine (sha256 "
            f"{entry.sha256[:12]}…, the build's was {str(rec.get('sha256'))[:12]}…): nothing was restored",
        )
    build_id = new_build_id(engine)
    job = worker_job(loaded, engine, build_id)  # the output placed and judged now, its write root with it
    output, root = Path(job["output"]), Path(job["write_root"])
    t0 = time.time()
    held = OutputHeld(state_dir(loaded.path), output, build_id, engine, within=root)
    try:
        if not held.take():
            raise RollbackError("TRT338", f"a build of {engine} is writing {output} now: roll back when it ends")
    except OSError as exc:
        raise RollbackError("TRT411", f"{exc.strerror or exc}; nothing was restored") from exc
    summary = _summary(loaded, engine, build_id, rec, t0, entry.build)
    try:
        restored = store.restore(entry, output, build_id, root, state_dir(loaded.path))
    except Refused as exc:
        raise RollbackError("TRT332", str(exc)) from exc
    except UnsafeWrite as exc:
        code = "TRT123" if exc.errno == errno.EEXIST else "TRT118"  # a file of the user's there, or a symlink
        raise RollbackError(code, f"{exc.filename}: {exc.strerror}; nothing was restored") from exc
    except OSError as exc:  # an immutable output, a read-only or full disk (RestoreFailed): located, with evidence
        code = exc.code if isinstance(exc, RestoreFailed) else "TRT405"
        summary.update(outcome="failed", error=f"{code} {exc.filename or output}: {exc.strerror or exc}")
        why = f"the restore failed ({code}): fix what it names, then roll back again"
        summary.update(runbook_without_worker(entry.build, ok=False, rule=why))
        summary["message"] = f"{summary['error']}; nothing was restored, the output is as it was"
        raise RollbackError(code, _record(loaded, summary)) from exc
    finally:
        held.release()
    summary["engineArtifact"] = {
        "action": "restored" if restored else "kept",
        "kind": "engine",
        "path": str(output),
        "size": entry.size,
        "sha256": entry.sha256,
    }
    summary["outputAlreadyCurrent"] = not restored  # the output already held these bytes: nothing was written
    summary["durationS"] = round(time.time() - t0, 3)
    summary["message"] = f"rolled back to the engine of build {rec.get('buildId')} ({ago(rec.get('startedAt'))})"
    _pin(loaded, engine, rec, summary, via)
    _record(loaded, summary)
    return summary


def _pin(loaded: Any, engine: str, rec: dict[str, Any], summary: dict[str, Any], via: str) -> None:
    """Pin the rolled-back engine against the recipe's key now (the evidence's `pinned`), or, when it is the
    recipe's own key, remove any pin: the recipe's engine is what the next build serves anyway."""
    pins = Pin(state_dir(loaded.path), engine)
    recipe_key = _recipe_key(loaded, engine)
    if recipe_key is not None and recipe_key == rec.get("key"):
        problem = pins.remove()
        summary["pinned"] = None
        summary["message"] += "; the recipe's own engine: not pinned"
    else:
        pin = {
            "buildId": rec.get("buildId"),
            "key": rec.get("key"),
            "sha256": rec.get("sha256"),
            "size": rec.get("size"),
            "startedAt": rec.get("startedAt"),
            "recipeKey": recipe_key,
            "pinnedAt": time.time(),
            "by": {"user": _user(), "host": os.uname().nodename, "pid": os.getpid(), "via": via},
            "rollback": summary["buildId"],
        }
        problem = pins.write(pin)
        summary["pinned"] = None if problem else pin
        if not problem:
            summary["message"] += "; pinned: trtls build serves it until the recipe changes or --unpin"
    if problem:
        summary["warnings"] = [problem]
        summary["message"] += f" — {problem}"


def _recipe_key(loaded: Any, engine: str) -> str | None:
    """The recipe's engine key now (None when it cannot be computed: no model, no builder)."""
    from trtls.builds.cuda import cuda_driver
    from trtls.store.key import KeyUnavailable, engine_key

    try:
        return engine_key(worker_job(loaded, engine, "key"), state_dir(loaded.path), cuda_driver()).hex
    except (KeyUnavailable, OSError):
        return None


def _user() -> str:
    import getpass

    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return str(os.getuid())


def _summary(
    loaded: Any, engine: str, build_id: str, rec: dict[str, Any], t0: float, engine_build: dict[str, Any]
) -> dict[str, Any]:
    """The rollback's record before the restore. `engine_build`: the store entry's record of the build that produced
    the engine (what built it; a known-good record of a reuse does not say)."""
    return {
        "trtlsVersion": __version__,
        "buildId": build_id,
        "engine": engine,
        "recipe": str(loaded.path),
        "outcome": "rolled_back",
        "rolledBackTo": {k: rec.get(k) for k in ("buildId", "startedAt", "key", "sha256", "size")},
        "engineKey": rec.get("key"),
        **runbook_without_worker(engine_build),  # every record kind carries the runbook's fields (core.evidence)
        "engineArtifact": None,
        "startedAt": t0,
        "durationS": 0.0,
        "workerPid": None,
    }


def _record(loaded: Any, summary: dict[str, Any]) -> str:
    """Write the rollback's evidence (`.trtls/runs/<id>/summary.json`, inside the recipe's folder); its message,
    which names a record that could not be written (TRT413) too."""
    path = state_dir(loaded.path) / "runs" / summary["buildId"] / "summary.json"
    try:
        write_record(path, json.dumps(summary, indent=2, default=str))
    except OSError as exc:
        summary["evidenceError"] = evidence_error(exc, path)
        summary["message"] = f"{summary['message']} — {summary['evidenceError']}"
        return str(summary["message"])
    return f"{summary['message']} (evidence: {path})"
