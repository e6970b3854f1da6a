"""The model a build whose supervisor died had read, for the record orphan recovery rebuilds (builds/supervisor/
orphans.py): as a live build's record names it (builds/supervisor/summary.model_read), but vouched for only when the
model provably is the one read. The sha256 comes through the store key's stat-keyed digest cache (`store.key
.file_sha256`, the recipe's `.trtls/digests.json`): the key hashed the model that way, so an unchanged model is
stat'ed, not read."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from trtls.builds.supervisor.running_state import RunningState
from trtls.core.paths import inside, real
from trtls.store.key import KeyUnavailable, file_sha256


def started_at(state: RunningState) -> float | None:
    """When the build started (epoch seconds), as its `running.json` says; None for an older record (or, in a damaged
    record's partial, one whose `startedAt` is not a finite number: running_state checked it)."""
    return None if state.started_at is None else float(state.started_at)


def model_read(state: RunningState, trtls_dir: Path) -> tuple[dict[str, Any], str, bool]:
    """The model the build read, as the supervisor's record names it (builds/supervisor/summary.model_read):
    `modelPath` from the job in `running.json`, `modelSha256` only when the model is provably the one read — not
    modified since the build started (its mtime against the record's `startedAt`) — and only through the door: a
    regular file whose real path stays inside the recipe's folder (a record can be planted; a link leading out is
    never followed). Returns (the fields, what is known or not of them, whether it is known)."""
    onnx = state.job.onnx if state.job is not None else None
    if not onnx:
        return {"modelPath": None, "modelSha256": None}, "which model the build read (its job names none)", False
    path, root = Path(onnx), trtls_dir.parent
    fields: dict[str, Any] = {"modelPath": str(path), "modelSha256": None}
    started = started_at(state)
    if started is None:
        return fields, "the model's sha256 (this older record does not say when the build started)", False
    try:
        target = real(path)
        if not inside(target, real(root)):
            return fields, f"the model's sha256 ({path} leads out of the recipe's folder: not read)", False
        if os.stat(target, follow_symlinks=False).st_mtime > started:
            return fields, "the model's sha256 (the model was written after the build started)", False
        sha = file_sha256(target, trtls_dir)  # the digest cache's when it holds this very file (the key hashed it)
        if os.stat(target, follow_symlinks=False).st_mtime > started:  # rewritten while it was hashed
            return fields, "the model's sha256 (the model was written after the build started)", False
    except (KeyUnavailable, OSError, ValueError) as exc:
        why = getattr(exc, "strerror", None) or exc
        return fields, f"the model's sha256 ({path} cannot be read now: {why})", False
    if sha is None:
        return fields, f"the model's sha256 ({path} is gone)", False
    fields["modelSha256"] = sha
    return fields, f"the model the build read: unchanged since it started (sha256 {sha[:16]}…)", True
