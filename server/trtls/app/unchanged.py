"""The store's fast path, before the recipe models are imported: an unchanged build of one engine restored from the
store (builds/avoidance/reuse.py). Kept apart from `trtls.app.build` so that taking it imports neither pydantic nor the
build
core; a miss goes on to `request_build`, which looks up again with everything loaded."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any


def reuse_unchanged(
    recipe: Path,
    engine: str,
    on_miss: Callable[[dict[str, Any] | None], None] | None = None,
    on_changed: Callable[[], None] | None = None,
) -> dict[str, Any] | None:
    """The reuse's evidence record when nothing the engine key reads changed since the last run and the store holds
    the key; None → the full request (which also makes every refusal and warning). `on_miss`: called when the key is
    known and the store lacks it (builds/avoidance/reuse.fast_hit), with the job the memo kept. `on_changed`: called
    when the engine's memo is there but no longer holds (something the key reads changed since its last build here):
    the key is then known only once the recipe is loaded, and most lookups after an edit miss."""
    from trtls.builds.avoidance.memo import built_here_before, look
    from trtls.core.recipe_file import is_readable_recipe

    if not is_readable_recipe(recipe):
        return None  # a FIFO, a device, a huge file: the full path refuses it (TRT104, TRT125) without reading it
    # the memo alone: a miss is known before the store's modules load. An edit outside the engine's view of the
    # recipe (a comment, another engine's table: builds/avoidance/recipe_view.py) leaves its job, so its key, as the
    # memo says: a miss is known the same way; a hit is left to the full path, which checks the edited recipe first.
    looked = look(recipe, engine, edited=True)
    if looked.memo is None:
        if on_changed is not None and built_here_before(recipe, engine):
            on_changed()
        return None
    if looked.missing:
        if on_miss is not None:
            on_miss(looked.job)
        return None
    if looked.edited:
        return None
    from trtls.builds.avoidance.reuse import fast_hit

    return fast_hit(recipe, engine, on_miss, looked)


def job_unchanged(recipe: Path, engine: str) -> dict[str, Any] | None:
    """A `--no-store` or `--rebuild` build of `engine` (certain to build): the job of its last build when nothing its
    key reads changed since, or the recipe changed only outside the engine's view (builds/avoidance/memo.look_job), to
    send ahead of the check; None otherwise."""
    from trtls.builds.avoidance.memo import look_job
    from trtls.core.recipe_file import is_readable_recipe

    return look_job(recipe, engine) if is_readable_recipe(recipe) else None
