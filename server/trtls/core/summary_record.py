"""One build's evidence record (`.trtls/runs/<build-id>/summary.json`) as a declared model, and its one loader.

Every record kind trtls writes loads as a `Summary`: built, cancelled, failed, forced and killed
(builds.supervisor.summary), recovered (builds.supervisor.orphans), reused and rolled back (builds.avoidance, which
start no worker), and the record of a matrix run (`kind: matrix`, its cells `MatrixCell`s), which shares the file
name. Readers take fields from the model (`summary.outcome`, `summary.buildId`), not from a dict by string, so a
renamed field is a type error and not a silent `None`.

Permissive by design: evidence written by an older trtls must still load. Every field is optional with the default
an absent key read as before (`None`, or an empty list where readers said `or []`), and fields not declared here are
kept (`extra="allow"`) and written back unchanged by `record()`. The closed sets of words are the vocabularies'
(`core.vocabulary`), so a record with a word trtls never wrote is a damaged record, said with its field.

`read_summary(path)` reads through the one door (a regular file, never through a final symlink, at most
`RECORD_LIMIT` bytes) and answers a `SummaryProblem` — the path and what is wrong, the field included — for a
record that cannot be read, is not JSON, or does not hold together; never a traceback.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, PrivateAttr, ValidationError, model_validator

from trtls.core.build_records import BuildEnvironment, BuildTarget, NetworkTyping
from trtls.core.evidence import RUNBOOK_FIELDS
from trtls.core.failure_record import Failure
from trtls.core.vocabulary import (
    BuilderModule,
    BuildOutcome,
    CacheDecision,
    CancelSource,
    Language,
    RecordCleanupStatus,
    RetryPolicy,
    ValidationStatus,
)

RECORD_LIMIT = 16 << 20  # a summary of ~300 phases is ~1 MiB; anything past this was not written by trtls
SUMMARY_NAME = "summary.json"
NotApplicable = Literal["not_applicable"]  # a builder field in the record of a run that started no worker
Number = int | float  # kept as written: `12` stays 12, so a face prints what the record says (not 12.0)


class MatrixCell(BaseModel):
    """One cell as a matrix run's record lists it (builds.supervisor.matrix): the build it started (`buildId` None and
    outcome `not_started`: never started), the engine it wrote, where it ran (`node`; None: here) and its own
    summary.json (`evidence`). Declared in the order the matrix writes them; undeclared keys are kept."""

    model_config = ConfigDict(extra="allow", frozen=True)

    cell: str | None = None
    engine: str | None = None
    buildId: str | None = None
    outcome: BuildOutcome | Literal["not_started"] | None = None
    output: str | None = None
    engineSha256: str | None = None
    node: dict[str, Any] | None = None
    evidence: str | None = None


class Summary(BaseModel):
    """The evidence record of one build (or one matrix run). Field names are the record's keys, as written."""

    model_config = ConfigDict(extra="allow", frozen=True)

    # what was built, and by which trtls
    framework: str | None = None
    trtlsVersion: str | None = None
    buildId: str | None = None
    kind: Literal["matrix"] | None = None  # a matrix run's record; a build's has no kind
    engine: str | None = None
    recipe: str | None = None
    outcome: BuildOutcome | None = None
    modelPath: str | None = None  # the model the build read (builds.supervisor.summary.model_read) …
    modelSha256: str | None = None  # … and its sha256: None when not known; absent from an older trtls's record
    error: str | None = None
    message: str | None = None  # a reuse's or a rollback's sentence, as the faces print it
    startedAt: Number | None = None  # seconds since the epoch
    durationS: Number | None = None
    events: str | None = None  # the events file, a name in the record's own folder
    # the runbook's fields (core.evidence.RUNBOOK_FIELDS)
    tensorrtVersion: str | None = None
    builderModule: BuilderModule | None = None
    language: Language | NotApplicable | None = None
    buildConfigHash: str | None = None
    gpuSku: str | None = None
    timingCacheMode: CacheDecision | None = None
    cancelSource: CancelSource | None = None
    cancelLatencyMs: Number | None = None
    cleanupLatencyMs: Number | None = None
    cleanupStatus: RecordCleanupStatus | None = None
    retryPolicy: RetryPolicy | None = None
    retryRule: str | None = None
    validationStatus: ValidationStatus | None = None
    validationNote: str | None = None
    # how the build ran and ended
    computeCapability: str | None = None
    target: BuildTarget | None = None  # build_started.target (core.build_records)
    network: NetworkTyping | None = None  # build_started.network
    optimizationProfiles: list[dict[str, Any]] | None = None  # as the builder config held them (read back)
    effectiveSettings: dict[str, Any] | None = None
    precision: dict[str, Any] | None = None  # the AutoCast conversion's record (core.events.PrecisionRecord)
    environment: BuildEnvironment | None = None  # the worker's environment record
    failure: Failure | None = None  # why it failed (core.failure_record: declared keys typed, others kept)
    timingCache: dict[str, Any] | None = None
    cancelReturnAfterSeenMs: Number | None = None
    forced: bool | None = None
    cancelAfterComplete: bool | None = None  # a stop that came once the engine was complete (it stands)
    outputCheck: dict[str, Any] | None = None  # the output folder checked before the build (TRT405, TRT412)
    workerPid: int | None = None
    logs: list[dict[str, Any]] = []  # the worker's last log lines (a reduction matches --fail-regex on them)
    stderrTail: list[str] = []
    engineArtifact: dict[str, Any] | None = None
    engineValidity: dict[str, Any] | None = None
    capability: dict[str, Any] | None = None
    previousEngineIntact: bool | None = None
    previousEngine: str | None = None
    artifacts: list[dict[str, Any]] = []
    notes: list[str] = []
    resources: dict[str, Any] | None = None
    cell: str | None = None
    parentId: str | None = None
    node: dict[str, Any] | None = None
    phaseTree: list[dict[str, Any]] = []
    supervisor: dict[str, Any] | None = None  # a recovered record: the process that died supervising it
    # what the engine store added (builds.avoidance)
    engineKey: str | None = None
    rebuiltBecause: list[str] | None = None
    store: dict[str, Any] | None = None
    reusedFrom: dict[str, Any] | None = None
    rolledBackTo: dict[str, Any] | None = None
    pinned: dict[str, Any] | None = None
    warnings: list[str] = []
    evidenceError: str | None = None
    # a matrix run's record
    title: str | None = None
    cells: list[MatrixCell] = []

    # the keys in the order the record had them: a face that prints it (`--json`) prints what was written, whether it
    # holds the dict it wrote (the fast path) or this model (the full path)
    _key_order: tuple[str, ...] = PrivateAttr(default=())

    @model_validator(mode="wrap")
    @classmethod
    def _keeps_its_key_order(cls, data: Any, handler: Any) -> Summary:
        summary: Summary = handler(data)
        if isinstance(data, dict):
            summary._key_order = tuple(data)
        return summary

    @classmethod
    def written(cls, record: dict[str, Any]) -> Summary:
        """A record this process just built (a reuse's, a rollback's, a build's), not read from disk: trusted as
        written, so not validated again (tests/store/test_record_kinds.py validates every kind)."""
        typed = {  # its worker's records typed too: readers take `summary.failure.kind`, `summary.environment.module`
            key: model.written(record[key])
            for key, model in _WORKER_RECORDS.items()
            if isinstance(record.get(key), dict)
        }
        if isinstance(record.get("cells"), list):  # a matrix run's: `summary.cells[0].outcome`
            typed["cells"] = [MatrixCell.model_construct(**c) if isinstance(c, dict) else c for c in record["cells"]]
        if typed:
            record = {**record, **typed}
        summary = cls.model_construct(**record)
        summary._key_order = tuple(record)
        return summary

    def record(self) -> dict[str, Any]:
        """The record as JSON data: the keys it was read with (undeclared ones included), none it did not have, in
        the order it had them."""
        data = self.model_dump(mode="json", exclude_unset=True)
        ordered = {k: data[k] for k in self._key_order if k in data}
        return ordered | data if len(ordered) < len(data) else ordered

    def missing_runbook_fields(self) -> list[str]:
        """The runbook fields the record does not carry (an old record, or a damaged one)."""
        return [k for k in RUNBOOK_FIELDS if k not in self.model_fields_set]


_WORKER_RECORDS: dict[str, Any] = {
    "failure": Failure,
    "environment": BuildEnvironment,
    "target": BuildTarget,
    "network": NetworkTyping,
}


@dataclass(frozen=True)
class SummaryProblem:
    """Why a record could not be read as a `Summary`: its path and what is wrong (the field, for a wrong value)."""

    path: Path
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


def summary_of(data: object, path: Path | str = SUMMARY_NAME) -> Summary | SummaryProblem:
    """A record already in memory (JSON data) as a `Summary`; `path` names it in a problem."""
    if not isinstance(data, dict):
        return SummaryProblem(Path(path), "not a build summary")
    try:
        return Summary.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "the record"
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        got = json.dumps(first.get("input"), default=str)[:80]
        return SummaryProblem(Path(path), f"not a build summary: {where} is {got}: {first['msg']}{more}")


def read_summary(path: Path, *, within: Path | None = None) -> Summary | SummaryProblem:
    """The record at `path`, read through the one door: a regular file (a FIFO, a device, a folder or a final
    symlink is refused before a byte is read), at most RECORD_LIMIT bytes, inside `within` when given (a run
    folder that is a link out of the project is refused), JSON, holding together."""
    from trtls.fs import UnreadableRecord, read_json_record

    try:
        data = read_json_record(path, limit=RECORD_LIMIT, within=within)
    except UnreadableRecord as exc:
        return SummaryProblem(path, str(exc))
    return summary_of(data, path)
