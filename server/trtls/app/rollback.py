"""`request_rollback`: the retry advice `rollback` as a use case — an earlier known-good engine restored from the
store to the output and pinned (builds.avoidance.rollback does the work). The terminal (`trtls rollback`) and the
editor (`trtls.rollbackEngine`, its TRT205 quick fix) both ask here, so the same mistake reads the same in both: an
engine the recipe has no table of is TRT107, nothing to go back to TRT338, an unusable store its own code."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from trtls.app.results import Refused, evidence_path
from trtls.core.codes import ERROR
from trtls.core.findings import Finding, TomlPath
from trtls.core.recipe import LoadedRecipe

if TYPE_CHECKING:
    from trtls.core.summary_record import Summary


@dataclass(frozen=True)
class RolledBack:
    """The engine is at the output (restored, or already there) and pinned; `summary` is the rollback's evidence
    record (outcome `rolled_back`); `evidence_error` is set when the restore happened but its record could not be
    written (TRT413)."""

    summary: Summary
    evidence_path: Path

    @property
    def evidence_error(self) -> str | None:
        return self.summary.evidenceError or None


@dataclass(frozen=True)
class RollbackFailed:
    """The rollback was tried and did not restore (nothing known-good, evicted, the store unusable, the output held
    or not writable): `code` and `message` say why, `path` the engine table it is about; the output is as it was."""

    code: str
    message: str
    path: TomlPath = ()

    @property
    def finding(self) -> Finding:
        """The failure as a finding on the engine's table: a face locates it in the recipe (file, line)."""
        return Finding(self.code, ERROR, self.message, self.path)


def request_rollback(
    loaded: LoadedRecipe, engine: str, to: str | None, via: str
) -> RolledBack | RollbackFailed | Refused:
    """Roll `engine` back to build `to` (default: the newest known-good build older than the engine at the output).
    `via`: who asked (recorded in the pin). Refused when the recipe is invalid or has no such engine table."""
    from trtls.app.request import refused_recipe

    refused = refused_recipe(loaded, [engine])
    if refused is not None:
        return refused
    from trtls.builds.avoidance.rollback import RollbackError, rollback
    from trtls.core.summary_record import Summary

    try:
        record = rollback(loaded, engine, to, via)
    except RollbackError as exc:
        return RollbackFailed(exc.code, str(exc), ("engines", engine))
    summary = Summary.written(record)
    return RolledBack(summary, evidence_path(loaded.path, str(summary.buildId)))
