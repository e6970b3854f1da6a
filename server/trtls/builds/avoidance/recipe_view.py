"""What of a recipe one engine's job is built from, as a digest the fast path's memo keeps (`recipeView`).

An edit to the recipe changes its bytes, so the memo no longer holds and the key is known only once the recipe models
load (~0.2 s here, issue 31). Many edits leave the engine's job as it was: a comment, the layout, another engine's
table, a key that no job reads. The job is built from the recipe's data — every top-level table, and of `[engines]` this
engine's own table alone (a recipe has no inheritance between engines) — less what no job reads (`NO_JOB_READS`: the
routes, the evidence's retention, an engine's stop grace and `trtls reduce` settings), so two recipes whose views are
equal give this engine the same job from the same files. The view is only a reason to send the last job ahead of the
check (builds/supervisor/speculation.py); the check's own job still decides (`same_job`), and a job built from anything
the view leaves out that differed would be discarded there, never built. Standard library only: it runs before the
recipe models are imported.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

# What of a recipe no engine's job reads (builds/supervisor/job.py `worker_job`), so an edit there leaves every job and
# key as they were: the `[routes]` (`trtls route`, `trtls accept`) and `[evidence]` (`trtls gc`, the retention after a
# build) tables, and of an engine's table the supervisor's `cancel_grace_s` and `trtls reduce`'s `[triage]`.
# tests/builds/test_recipe_view.py builds each edited recipe's job with the real models and finds it unchanged. A key
# that does feed a job must not be here: its edit would send the last job ahead, to be found different by the check
# (`same_job`) and discarded — never built, but the build then starts late.
NO_JOB_READS = {"recipe": ("routes", "evidence"), "engine": ("cancel_grace_s", "triage")}


def view_of(data: dict[str, Any], engine: str) -> str | None:
    """The digest of `engine`'s view of the recipe's raw TOML `data`; None when the recipe has no such engine."""
    engines = data.get("engines")
    if not isinstance(engines, dict) or not isinstance(engines.get(engine), dict):
        return None
    own = {k: v for k, v in engines[engine].items() if k not in NO_JOB_READS["engine"]}
    view = {**{k: v for k, v in data.items() if k not in NO_JOB_READS["recipe"]}, "engines": {engine: own}}
    text = json.dumps(view, sort_keys=True, default=repr, ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()


def recipe_view(recipe: Path, engine: str) -> str | None:
    """`view_of` the recipe file (read bounded, through the door, once per version: `recipe_snapshot`); None when it
    cannot be read or parsed — then no memo's job goes ahead of an edit."""
    from trtls.core.recipe_file import recipe_snapshot

    try:
        return view_of(recipe_snapshot(recipe).data, engine)
    except (OSError, ValueError):
        return None
