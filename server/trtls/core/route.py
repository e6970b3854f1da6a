"""Route tables (`[routes.NAME]`): placeholder until the gates land; routes are accepted unvalidated."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .findings import Finding

if TYPE_CHECKING:
    from .recipe import LoadedRecipe, RecipeFile


def validate_routes(loaded: "LoadedRecipe", recipe: "RecipeFile") -> list[Finding]:
    return []
