"""What a request to start work answers. A face renders these and nothing else: it never re-derives whether a build
started, was served by the store or was refused."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from trtls.core.codes import ERROR
from trtls.core.findings import Finding, TomlPath

if TYPE_CHECKING:  # the model's pydantic is loaded where a result is made (the recipe models are by then); a
    # store hit makes no Build: the build core is loaded where one starts; the store's modules are loaded by the
    # lookup that makes a StoreUse, not by a refusal the terminal may say before it (app.request, ~10 ms here)
    from trtls.builds.supervisor.build import Build
    from trtls.builds.supervisor.matrix import MatrixBuild, PlannedCell
    from trtls.core.summary_record import Summary
    from trtls.store.use import StoreUse

# why a request started nothing: the recipe has errors, the request names what the recipe lacks (an engine, a
# cell), the store cannot serve its mode (TRT330/TRT331), a rollback's pin cannot be served (nothing is built over
# it), or no node of the cluster can hold some cell (nothing was submitted)
RefusedBecause = Literal["invalid_recipe", "bad_request", "store_error", "pin_unavailable", "no_node"]


@dataclass(frozen=True)
class Refused:
    """Nothing started. `findings` say why, located on the recipe where a key is to blame; `warnings`: the store's
    notes gathered before the refusal (a face says them first)."""

    because: RefusedBecause
    findings: list[Finding]
    warnings: list[str] = field(default_factory=list)

    @property
    def lines(self) -> list[str]:
        """`CODE message` per finding: what a reply's `errors` lists."""
        return [f"{f.code} {f.message}" for f in self.findings]


@dataclass(frozen=True)
class Reused:
    """The engine store (or a rollback's pin) served the engine: restored to the output, no worker started.
    `summary` is the reuse's evidence record (outcome `reused`), `evidence_path` its summary.json."""

    summary: Summary
    evidence_path: Path
    use: StoreUse | None = None

    @property
    def build_id(self) -> str:
        return str(self.summary.buildId)


@dataclass(frozen=True)
class Started:
    """A worker build started; `use` publishes it to the store when it ends (already attached)."""

    build: Build
    use: StoreUse | None = None


@dataclass(frozen=True)
class AlreadyBuilding:
    """A build of the same engine from the same recipe is running (the run registry's): no second one starts."""

    build: Build


@dataclass(frozen=True)
class MatrixStarted:
    """A matrix or farm run: `matrix` builds `left`; `reused` are the cells the store served before anything
    started. `matrix` is None when every cell was served (no run started)."""

    matrix: MatrixBuild | None
    left: list[PlannedCell]
    reused: list[tuple[PlannedCell, Summary]]
    warnings: list[str] = field(default_factory=list)


def request_error(code: str, message: str, path: TomlPath = ()) -> Finding:
    """A request naming what the recipe lacks: an error finding, on the recipe (or the table at `path`)."""
    return Finding(code, ERROR, message, path)


def evidence_path(recipe: Path, build_id: str) -> Path:
    """Where a run's evidence record is: `.trtls/runs/<id>/summary.json` beside the recipe."""
    return recipe.parent / ".trtls" / "runs" / build_id / "summary.json"
