"""The user's own failed build of the whole model, reused as a reduction's first trial (`confirm`).

A reduction starts by learning the failure it must reproduce. When the user has just built the engine and it failed
(the build that offered Reduce in the editor, or `trtls build` before `trtls reduce`), that build already measured
it: its evidence (`.trtls/runs/<id>/summary.json`) holds the error, the log and the classified failure. It is the
same build as the confirm trial when its `engineKey` — the store's key, one sha256 over the model's bytes (external
data included), the settings, the profiles, the precision and the builder module and version — is the key of the
engine as the recipe gives it now; a trial differs from it only in what cannot change the failure (its output path,
no timing cache). So the newest such record, of the engine itself (not a trial, not a matrix cell, not cancelled),
is the confirm trial's verdict, and one build fewer is spent. Anything else builds the whole model as before.
"""

from __future__ import annotations

from trtls.builds.roots import state_root
from trtls.builds.supervisor.job import state_dir
from trtls.core.recipe import LoadedRecipe
from trtls.core.summary_record import SUMMARY_NAME, Summary, SummaryProblem, read_summary

LOOK_BACK = 50  # the newest records of the engine looked at: a failure to reuse is the one the user just saw


def current_key(loaded: LoadedRecipe, engine: str) -> str | None:
    """The engine's store key as the recipe gives it now (None when it cannot be computed: no builder, no model)."""
    from trtls.builds.cuda import cuda_driver
    from trtls.builds.supervisor.job import worker_job
    from trtls.store.key import KeyUnavailable, engine_key

    try:
        return engine_key(worker_job(loaded, engine, "key"), state_dir(loaded.path), cuda_driver()).hex
    except (KeyUnavailable, OSError, ValueError):
        return None


def failed_build(loaded: LoadedRecipe, engine: str, key: str | None) -> Summary | None:
    """The newest failed build of `engine` whose `engineKey` is `key`: its record, or None. A record being written,
    damaged or too large (core.summary_record's one loader says which) is not one to reuse."""
    runs = state_dir(loaded.path) / "runs"
    if key is None or not runs.is_dir():
        return None
    folders = sorted((p for p in runs.glob(f"{engine}-*") if p.is_dir()), key=lambda p: p.name, reverse=True)
    for folder in folders[:LOOK_BACK]:
        record = read_summary(folder / SUMMARY_NAME, within=state_root(folder))  # never through a link out
        if isinstance(record, SummaryProblem) or record.engine != engine or record.parentId or record.cell:
            continue
        if record.engineKey == key and record.outcome == "failed" and not record.cancelSource:
            return record
    return None
