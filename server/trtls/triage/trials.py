"""One trial of a reduction: a candidate model built by a real worker, exactly as the engine would be built.

Same builder settings (unless the trial reverts one), same builder module, profiles cut to the candidate's inputs;
never the engine's own output or timing cache (the trial writes under `.trtls/reduce/<id>/trials/`, cache off), so a
reduction cannot touch a file the user owns. Each trial is a build with its own evidence, a child of the reduction.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trtls.builds.roots import state_root
from trtls.builds.supervisor.supervisor import Build, Supervisor
from trtls.core.failure_record import Failure
from trtls.core.recipe import LoadedRecipe
from trtls.core.summary_record import Summary
from trtls.fs import Kind, remove_file


@dataclass
class Trial:
    index: int
    step: str  # confirm | named_node | outputs | first_node | inputs | inputs_span | settings
    nodes: int
    first: int
    last: int
    build_id: str
    outcome: str | None = None
    still_fails: bool = False
    failure: Failure | None = None  # the trial build's classified failure (summary.json's)
    seconds: float = 0.0
    reverted: dict[str, Any] = field(default_factory=dict)  # settings a `settings` trial put back to their default
    replayed: bool = False  # a resumed reduction's verdict from the stopped one: not built again
    reused: bool = False  # the user's own failed build of the same engine key (its build id): not built again

    def record(self) -> dict[str, Any]:
        return {
            "trial": self.index,
            "step": self.step,
            "nodes": self.nodes,
            "firstNode": self.first,
            "lastNode": self.last,
            "buildId": self.build_id,
            "outcome": self.outcome,
            "stillFails": self.still_fails,
            "failure": self.failure.record() if self.failure is not None else None,
            "seconds": round(self.seconds, 3),
            **({"reverted": self.reverted} if self.reverted else {}),
            **({"replayed": True} if self.replayed else {}),
            **({"reused": True} if self.reused else {}),
        }


class TrialRunner:
    """Builds candidates for one reduction; `current` is the trial build running now (what a stop cancels)."""

    def __init__(self, loaded: LoadedRecipe, engine: str, folder: Path, reduction_id: str) -> None:
        self.loaded, self.engine, self.folder, self.reduction_id = loaded, engine, folder, reduction_id
        self.supervisor = Supervisor()
        self.current: Build | None = None
        self.listeners: list[Any] = []  # called (trial, build) when a trial's build starts

    async def build(
        self,
        trial: Trial,
        onnx_path: Path,
        profiles: list[dict[str, Any]] | None,
        settings: dict[str, Any] | None = None,
    ) -> Summary:
        output = self.folder / "trials" / f"{trial.index:03d}.engine"  # never beside the user's model
        overrides: dict[str, Any] = {"onnx": str(onnx_path), "output": str(output), "cache_mode": "off"}
        if profiles is not None:
            overrides["profiles"] = profiles
        if settings:
            overrides["settings"] = settings
        started = time.monotonic()
        build = self.supervisor.start(
            self.loaded, self.engine, overrides=overrides, build_id=trial.build_id, parent_id=self.reduction_id
        )
        self.current = build
        for listener in self.listeners:
            listener(trial, build)
        try:
            record = await build.wait()  # the record the trial's build just wrote, as it wrote it
        finally:
            self.current = None
            trial.seconds = time.monotonic() - started
            with contextlib.suppress(OSError):  # a trial's engine is not a result: only the failing models are kept
                remove_file(output, kind=Kind.evidence, within=state_root(output))
        trial.outcome = record.outcome
        trial.failure = record.failure
        return record
