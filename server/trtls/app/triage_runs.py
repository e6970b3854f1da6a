"""The triage runs trtls.app.triage constructs: a reduction (`ReductionRun`) and a divergence search
(`DivergenceRun`). Each is what a face holds while it runs — stopped by `cancel(source)`, listed by `row(uri)` (the
server's registry of runs: trtls.builds.supervisor.runs.Run), its record at `evidence_file()` — and `run()` does
the work the triage package defines, never raising: what went wrong inside is in the record it returns."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Generic, TypeVar

from trtls.core import wire

if TYPE_CHECKING:
    from trtls.core.cancel import CancelToken
    from trtls.core.recipe import LoadedRecipe
    from trtls.core.triage_records import DivergenceResult, ReductionResult
    from trtls.triage.diverge_run import DivergenceSetup
    from trtls.triage.reduce_build import Reduction
    from trtls.triage.trials import TrialRunner

Record = TypeVar("Record", bound="ReductionResult | DivergenceResult")


class RecordedRun(Generic[Record]):
    """What a triage run answers from its record (`result`: None while it runs), as every kind of run does
    (builds.supervisor.runs.Run): `record`, the record's model (trtls.showEvidence sends its JSON), `running`, and
    `status`, which the run's `ended` words once the record is there."""

    result: Record | None

    @property
    def record(self) -> Record | None:
        return self.result

    @property
    def running(self) -> bool:
        return self.result is None

    @property
    def status(self) -> str:
        return "running" if self.result is None else self.ended(self.result)

    def ended(self, result: Record) -> str:
        raise NotImplementedError


@dataclass
class ReductionRun(RecordedRun["ReductionResult"]):
    """A reduction of `red.engine`: `runner` builds its trials (its `listeners` are told each trial's build);
    `result` is its evidence record (result.json's model) once `run()` wrote it, also answered as `record` (what every
    kind of run answers: builds.supervisor.runs.Run, trtls.showEvidence)."""

    red: Reduction
    loaded: LoadedRecipe
    runner: TrialRunner
    result: ReductionResult | None = None

    @property
    def id(self) -> str:
        return str(self.red.id)

    @property
    def engine(self) -> str:
        return str(self.red.engine)

    def ended(self, result: ReductionResult) -> str:
        return result.outcome

    @property
    def evidence_dir(self) -> Path:
        return Path(self.red.folder)

    def cancel(self, source: str) -> bool:
        return self.result is None and bool(self.red.token.request(source))

    def evidence_file(self) -> Path | None:
        """result.json, claimed only once it was written (TRT413 `evidenceError` otherwise)."""
        return self.evidence_dir / "result.json" if self.result is not None and not self.error_text else None

    @property
    def error_text(self) -> str | None:
        """Why the reduction's evidence could not be written (TRT413), or None."""
        return self.result.evidenceError if self.result is not None else None

    def row(self, uri: str) -> wire.ListedBuild:
        """The reduction as trtls.listBuilds lists it: its trials are the builds whose parentId is this id."""
        from trtls.triage.evidence import headline

        evidence = self.evidence_file()
        return wire.ListedBuild(
            buildId=self.id,
            engine=self.engine,
            uri=uri,
            kind="reduction",
            status=self.status,
            cancelSource=self.red.token.source,
            headline=headline(self.red),
            evidencePath=str(evidence) if evidence else None,
            evidenceError=self.error_text,
        )

    async def run(self) -> ReductionResult:
        """Reduce, then write the evidence (result.json, minimal.onnx): the record, also kept as `result`."""
        from trtls.triage.evidence import write_evidence
        from trtls.triage.reduce_build import run_reduction

        try:
            await run_reduction(self.loaded, self.engine, self.red, self.runner)
        except Exception as exc:  # run_reduction says what failed inside it; anything else is said the same way
            self.red.error = f"{type(exc).__name__}: {exc}"
        onnx = self.loaded.resolve(self.loaded.engine(self.engine).onnx)
        self.result = write_evidence(self.red, self.loaded.path, onnx)
        return self.result


@dataclass
class DivergenceRun(RecordedRun["DivergenceResult"]):
    """A divergence search: of a conversion (`setup`: the engine's or the route's, checked) or of two given models
    (`pair`: reference, candidate). `step` is what it is doing now; `result` its record once `run()` ended
    (also answered as `record`: builds.supervisor.runs.Run);
    `error` / `error_code` what stopped it (TRT104 or TRT107: an input it could not use; None: a failure)."""

    id: str
    engine: str | None  # None: a route that deploys its ONNX (converted by [routes.X.precision])
    route: str | None
    folder: Path
    token: CancelToken
    loaded: LoadedRecipe
    step: str = "starting"
    result: DivergenceResult | None = None
    error: str | None = None
    error_code: str | None = None
    setup: DivergenceSetup | None = None
    pair: tuple[Path, Path] | None = None
    fix: bool = False
    tensorrt: bool = False
    inputs: Path | None = None
    rtol: float | None = None
    listeners: list[Callable[[str], object]] = field(default_factory=list)  # told each step, on the loop

    def ended(self, result: DivergenceResult) -> str:
        return "cancelled" if result.cancelled else "failed" if self.error else "done"

    @property
    def evidence_dir(self) -> Path:
        return self.folder

    @property
    def what(self) -> str:
        """What is compared, for a title: the route, the engine, or the reference model's stem."""
        return self.route or self.engine or (self.pair[0].stem if self.pair else "?")

    def cancel(self, source: str) -> bool:
        return self.result is None and bool(self.token.request(source))

    def evidence_file(self) -> Path | None:
        """divergence.json, once the search wrote it (trtls.triage.diverge_run)."""
        path = self.folder / "divergence.json"
        return path if self.result is not None and path.is_file() else None

    def row(self, uri: str) -> wire.ListedBuild:
        evidence = self.evidence_file()
        return wire.ListedBuild(
            buildId=self.id,
            engine=self.engine or self.route or "?",
            uri=uri,
            route=self.route,
            kind="divergence",
            status=self.status,
            cancelSource=self.token.source,
            headline=f"diverge {self.route or self.engine} · {self.step}",
            evidencePath=str(evidence) if evidence else None,
        )

    async def run(self) -> DivergenceResult:
        """The search, off the loop (ONNX Runtime, ModelOpt): its record, also kept as `result`."""
        from trtls.triage.diverge_run import DivergenceUnavailable

        loop = asyncio.get_running_loop()

        def on_step(text: str) -> None:  # on the loop: the search runs in a thread
            self.step = text
            if self.result is None:
                for listener in self.listeners:
                    listener(text)

        def report(text: str) -> None:
            loop.call_soon_threadsafe(on_step, text)

        try:
            record = await asyncio.to_thread(self._search, report)
        except (DivergenceUnavailable, KeyError, OSError) as exc:  # a model, inputs or a name it cannot use
            self.error_code = "TRT107" if isinstance(exc, KeyError) else "TRT104"
            # a KeyError's str() is its key quoted; an OSError's ends with a quoted path, kept whole
            self.error = str(exc.args[0]) if isinstance(exc, KeyError) and exc.args else str(exc)
            record = self._failed()
        except Exception as exc:  # ModelOpt missing or failing: the record says it
            self.error = f"{type(exc).__name__}: {exc}"
            record = self._failed()
        self.result = record
        return record

    def _search(self, report: Callable[[str], object]) -> DivergenceResult:
        if self.pair is not None:
            from trtls.triage.diverge_pair import run_pair_divergence

            reference, candidate = self.pair
            return run_pair_divergence(
                self.loaded,
                reference,
                candidate,
                engine=self.engine,
                inputs=self.inputs,
                rtol=self.rtol,
                token=self.token,
                rid=self.id,
            )
        from trtls.triage.diverge_run import run_divergence

        return run_divergence(
            self.loaded,
            fix=self.fix,
            token=self.token,
            rid=self.id,
            report=report,
            setup=self.setup,
            tensorrt=self.tensorrt,
        )

    def _failed(self) -> DivergenceResult:
        """The record of a search that could not run to its end (nothing written)."""
        from trtls.core.triage_records import DivergenceResult

        failed = DivergenceResult(
            kind="divergence",
            id=self.id,
            engine=self.engine,
            route=self.route,
            firstDiverging=None,
            cancelled=self.token.is_set,
            cancelSource=self.token.source,
            error=self.error,
            rounds=[],
            folder=str(self.folder),
        )
        if self.pair is not None:
            reference, candidate = (str(p) for p in self.pair)
            return failed.model_copy(
                update=dict(mode="models", precision=None, reference=reference, candidate=candidate)
            )
        if self.setup is not None:
            return failed.model_copy(update=dict(precision=self.setup.spec["convert"], rangeRtol=self.setup.threshold))
        return failed
