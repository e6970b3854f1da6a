"""What every gate gets: the recipe, the route (typed by `core.route.RouteModel`), what earlier gates found, the
run's options, and a record the gates share (bundle_digest, validation_status, …; the route summary picks it up)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trtls.core.gate_result import GateCheck
from trtls.core.recipe import LoadedRecipe
from trtls.core.route import RouteModel
from trtls.gates.environment import Gate2Result
from trtls.gates.source import Gate1Result


@dataclass
class GateContext:
    loaded: LoadedRecipe
    route_name: str
    route: RouteModel
    checks: list[GateCheck] = field(default_factory=list)  # every check so far, earlier gates first
    gate1: Gate1Result | None = None
    gate2: Gate2Result | None = None
    record: dict[str, Any] = field(default_factory=dict)  # gates write bundle_digest, validation_status, … here
    cancel: Callable[[], bool] | None = None
    progress: Callable[[int, str], None] | None = None
    # the run's options
    use_digest_cache: bool = True  # gate 1: reuse .trtls/digests.json
    environment: dict[str, Any] | None = None  # gate 2: a given environment instead of discovering this machine's

    @property
    def recipe_dir(self) -> Path:
        return Path(self.loaded.base_dir)

    def resolve(self, relative: str) -> Path:
        return self.loaded.resolve(relative)


GateHook = Callable[[GateContext], list[GateCheck]]
