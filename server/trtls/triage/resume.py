"""`trtls reduce --resume`: continue a stopped reduction instead of starting from the whole model.

A reduction's `result.json` keeps what it had found (`resume`: the model's and the engine's hashes, the failure it
reproduces, the smallest failing candidate and every trial's verdict under its candidate's key). The search is
deterministic given those verdicts (the same cuts of the same model, the probe seeded), so a resumed reduction
replays them — each is a trial marked `replayed`, not built — and builds only from where the stop came. It resumes
only a reduction of the same engine that was stopped (Ctrl-C, `--timeout`, the editor's Stop, `--max-trials`) and
only when the model's files and the engine's table hash the same; otherwise it starts over and says why.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from trtls.builds.roots import state_root
from trtls.core.recipe import LoadedRecipe
from trtls.fs import read_text
from trtls.triage.reduce_build import Reduction, engine_sha256

RESUMABLE = ("cancelled", "stopped")
RECORD_LIMIT = 64 << 20


def _latest(folder: Path, engine: str, but: str) -> tuple[Path, dict[str, Any]] | None:
    """The newest reduction of `engine` under `.trtls/reduce/` with a readable record (ids sort by their time)."""
    if not folder.is_dir():
        return None
    for path in sorted(folder.glob(f"reduce-{engine}-*"), key=lambda p: p.name, reverse=True):
        if path.name == but or not path.is_dir():
            continue
        try:
            record = json.loads(read_text(path / "result.json", limit=RECORD_LIMIT, within=state_root(path)))
        except (OSError, ValueError):
            continue  # a reduction that left no record (or a damaged one) is not one to continue
        if isinstance(record, dict) and record.get("engine") == engine:
            return path, record
    return None


async def prepare_resume(loaded: LoadedRecipe, engine: str, red: Reduction) -> str:
    """Load the newest stopped reduction of `engine` into `red` (its verdicts to replay); the note says what was
    resumed, or why the reduction starts over."""
    from trtls.builds.precision import input_digest

    eng = loaded.engine(engine)
    red.model_sha256 = await asyncio.to_thread(input_digest, loaded.resolve(eng.onnx))
    red.recipe_sha256 = engine_sha256(eng)
    found = _latest(red.folder.parent, engine, red.id)
    if found is None:
        return f"--resume: no earlier reduction of {engine} to continue: starting from the whole model"
    path, record = found
    found_state = record.get("resume")
    state: dict[str, Any] = found_state if isinstance(found_state, dict) else {}
    if record.get("outcome") not in RESUMABLE:
        return (
            f"--resume: the latest reduction of {engine} ({path.name}) ended {record.get('outcome')}, not stopped: "
            "starting from the whole model"
        )
    if state.get("modelSha256") != red.model_sha256:
        return f"--resume: the model changed since {path.name}: starting from the whole model"
    if state.get("recipeSha256") != red.recipe_sha256:
        return f"--resume: the engine's table in the recipe changed since {path.name}: starting from the whole model"
    recorded = state.get("failure")
    failure: dict[str, Any] = recorded if isinstance(recorded, dict) else {}
    if list(failure.get("patterns") or []) != red.fail_regex:
        return f"--resume: the --fail-regex patterns differ from {path.name}'s: starting from the whole model"
    verdicts = state.get("verdicts")
    if not isinstance(verdicts, dict) or not isinstance(state.get("failure"), dict) or "confirm" not in verdicts:
        return f"--resume: {path.name} recorded no verdict to continue from: starting from the whole model"
    red.replay = {str(k): v for k, v in verdicts.items() if isinstance(v, dict) and "stillFails" in v}
    red.target = state["failure"]
    red.resumed_from = path.name
    smallest = state.get("smallest") or {}
    nodes = f"{smallest['nodes']} nodes" if smallest.get("nodes") else "no smaller failing model yet"
    return f"--resume: continuing {path.name} ({len(red.replay)} verdicts replayed, not rebuilt; {nodes})"
