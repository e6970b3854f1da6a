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


def _latest(folder: Path, engine: str, but: str) -> tuple[Path, ReductionResult] | ResultProblem | None:
    """The newest reduction of `engine` under `.trtls/reduce/` with a readable record (ids sort by their time); when
    none has one, the newest one's problem (a damaged record, said with its field), or None when there is none."""
    if not folder.is_dir():
        return None
    problem = None
    for path in sorted(folder.glob(f"reduce-{engine}-*"), key=lambda p: p.name, reverse=True):
        if path.name == but or not path.is_dir():
            continue
        result = read_reduction_result(path / RESULT_NAME, within=state_root(path))
        if isinstance(result, ReductionResult) and result.engine == engine:
            return path, result
        if isinstance(result, ResultProblem) and result.field is not None:  # damaged, not merely never written
            problem = problem or result
        # a reduction that left no record (or a damaged one) is not one to continue
    return problem


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
    if isinstance(found, ResultProblem):  # located: the file and the field, not a silent fresh start
        return f"--resume: no earlier reduction of {engine} to continue ({found}): starting from the whole model"
    path, result = found
    state = result.resume
    if result.outcome not in RESUMABLE:
        return (
            f"--resume: the latest reduction of {engine} ({path.name}) ended {result.outcome}, not stopped: "
            "starting from the whole model"
        )
    if state.modelSha256 != red.model_sha256:
        return f"--resume: the model changed since {path.name}: starting from the whole model"
    if state.recipeSha256 != red.recipe_sha256:
        return f"--resume: the engine's table in the recipe changed since {path.name}: starting from the whole model"
    failure = state.failure
    if list((failure.patterns if failure is not None else None) or []) != red.fail_regex:
        return f"--resume: the --fail-regex patterns differ from {path.name}'s: starting from the whole model"
    if failure is None or "confirm" not in state.verdicts:
        return f"--resume: {path.name} recorded no verdict to continue from: starting from the whole model"
    red.replay = dict(state.verdicts)
    red.target = failure
    red.resumed_from = path.name
    smallest = state.smallest
    nodes = f"{smallest.nodes} nodes" if smallest is not None and smallest.nodes else "no smaller failing model yet"
    return f"--resume: continuing {path.name} ({len(red.replay)} verdicts replayed, not rebuilt; {nodes})"
