"""The one error a route build raises for bad input, located under `routes.<name>` when it can be."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from trtls.core.terminal_text import terminal_safe

if TYPE_CHECKING:
    from trtls.core.recipe import LoadedRecipe


class RouteBuildError(Exception):
    """The route cannot be built as asked (bad checkpoint, no exporter, …); nothing was promoted."""

    def __init__(self, message: str, path: tuple[Any, ...] = ()):
        super().__init__(terminal_safe(message))  # it names checkpoint entries and recipe paths (issue 27 item 13)
        self.path = path


def recipe_errors(loaded: LoadedRecipe) -> RouteBuildError:
    """The error for a recipe that does not validate: its first five findings, each with its location."""
    return RouteBuildError(
        "the recipe has errors: " + "; ".join(f"{loaded.location(f)}: {f.code} {f.message}" for f in loaded.errors[:5])
    )
