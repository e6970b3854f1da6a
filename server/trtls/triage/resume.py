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
from pathlib import Path

from trtls.builds.roots import state_root
from trtls.core.recipe import LoadedRecipe
from trtls.core.triage_records import RESULT_NAME, ReductionResult, ResultProblem, read_reduction_result
from trtls.triage.reduce_build import Reduction, engine_sha256

RESUMABLE = ("cancelled", "stopped")


def _latest(folder: Path, engine: str, but: str) -> tuple[tuple[Path, ReductionResult] | None, ResultProblem | None]:
    """The newest reduction of `engine` under `.trtls/reduce/` with a readable record (ids sort by their time), or
    None; and the newest damaged record (said with its field) among those newer than it, or among all when none is
    readable — so a damaged newest record is said, not silently passed over for an older one."""
    if not folder.is_dir():
        return None, None
    problem = None
    for path in sorted(folder.glob(f"reduce-{engine}-*"), key=lambda p: p.name, reverse=True):
        if path.name == but or not path.is_dir():
            continue
        result = read_reduction_result(path / RESULT_NAME, within=state_root(path))
        if isinstance(result, ReductionResult) and result.engine == engine:
            return (path, result), problem
        if isinstance(result, ResultProblem) and result.field is not None:  # damaged, not merely never written
            problem = problem or result
        # a reduction that left no record (or a damaged one) is not one to continue
    return None, problem


async def prepare_resume(loaded: LoadedRecipe, engine: str, red: Reduction) -> str:
    """Load the newest stopped reduction of `engine` into `red` (its verdicts to replay); the note says what was
    resumed, or why the reduction starts over."""
    from trtls.builds.precision import input_digest

    eng = loaded.engine(engine)
    red.model_sha256 = await asyncio.to_thread(input_digest, loaded.resolve(eng.onnx))
    red.recipe_sha256 = engine_sha256(eng)
    found, damaged = _latest(red.folder.parent, engine, red.id)
    if found is None and damaged is None:
        return f"--resume: no earlier reduction of {engine} to continue: starting from the whole model"
    if found is None:  # located: the file and the field, not a silent fresh start
        return f"--resume: no earlier reduction of {engine} to continue ({damaged}): starting from the whole model"
    note = _passed_over(damaged)
    path, result = found
    state = result.resume
    if result.outcome not in RESUMABLE:
        return (
            f"--resume: the latest reduction of {engine} ({path.name}) ended {result.outcome}, not stopped: "
            "starting from the whole model" + note
        )
    if state.modelSha256 != red.model_sha256:
        return f"--resume: the model changed since {path.name}: starting from the whole model" + note
    if state.recipeSha256 != red.recipe_sha256:
        return (
            f"--resume: the engine's table in the recipe changed since {path.name}: starting from the whole model"
            + note
        )
    failure = state.failure
    if list((failure.patterns if failure is not None else None) or []) != red.fail_regex:
        return f"--resume: the --fail-regex patterns differ from {path.name}'s: starting from the whole model" + note
    if failure is None or "confirm" not in state.verdicts:
        return f"--resume: {path.name} recorded no verdict to continue from: starting from the whole model" + note
    red.replay = dict(state.verdicts)
    red.target = failure
    red.resumed_from = path.name
    smallest = state.smallest
    nodes = f"{smallest.nodes} nodes" if smallest is not None and smallest.nodes else "no smaller failing model yet"
    return f"--resume: continuing {path.name} ({len(red.replay)} verdicts replayed, not rebuilt; {nodes})" + note


def _passed_over(damaged: ResultProblem | None) -> str:
    """What the note adds when a newer reduction's record is damaged and an older one is the one considered."""
    return "" if damaged is None else f"; a newer reduction's record is damaged and was passed over ({damaged})"
