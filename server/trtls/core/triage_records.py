"""The triage runs' records as declared models (issue 28, typed seams): a reduction's `result.json`
(`ReductionResult`, written by triage.evidence, read back by triage.resume, the faces and report.reduction_page, which
is why they live in core: the report may not import triage), the failure it compares
(`FailureSignature`, triage.signature) and a divergence search's record (`DivergenceResult`, divergence.json plus the
folder it was written to; its gate-4 re-run `ParityRerun` and its TensorRT comparison `TensorrtLayers`). A reader
takes `result.outcome`, not `record["outcome"]`: a renamed key is a type error.

Each dumps as the JSON written before these models existed, key for key and in the same order (`record()`): the
fields are declared in the order the writers write them, and a key the writer leaves out (a trial's `replayed`, a
signature's `op`, the reduction's `evidenceError`, a two-model search's `mode`, a re-run's `bundle`) is not written as
`null`. Strict where declared (a wrong type is refused, said with its field) and closed (`extra="forbid"`): a key no
field declares is a damaged record, not one kept silently. A key that records written before it existed lack (a
search's `cancelSource`, a round's `outputRangeError`, a tensor's `overflow`) has a default, so those records load.
`read_reduction_result` and `read_divergence_result` are the readers of the records from disk.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from trtls.core.failure_record import Failure
from trtls.core.gate_result import CheckStatus, Decision

RESULT_NAME = "result.json"  # a reduction's, in `.trtls/reduce/<id>/`
DIVERGENCE_NAME = "divergence.json"  # a divergence search's, in the same kind of folder
RECORD_LIMIT = 64 << 20  # either record: every trial's or every tensor's row, far below this
JsonObject = dict[str, Any]  # nested JSON no reader takes apart by field (a profile, a setting, a check's stats)


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True, strict=True, extra="forbid")

    def record(self) -> dict[str, Any]:
        """As JSON data: the keys it was given, in the order the model declares them (the writers' order)."""
        return self.model_dump(mode="json", exclude_unset=True)


TriageRecord = TypeVar("TriageRecord", bound=_Record)


class FailureSignature(_Record):
    """The parts of a failed build's failure a reduction compares (triage.signature): a classified failure
    (`kind`, `errorCode`, `assertion`, `sourceFile`, `layer`), a parser rejection (the same, with `op`) or a
    --fail-regex match (`patterns`, `pattern`, `matched`, `layer`)."""

    kind: str
    patterns: list[str] | None = None
    pattern: str | None = None
    matched: str | None = None
    errorCode: int | str | None = None  # TensorRT's `Error Code N`, or the trtls code of a setting, a plugin …
    assertion: str | None = None
    sourceFile: str | None = None
    layer: str | None = None
    op: str | None = None


class TrialRecord(_Record):
    """One trial as result.json lists it (triage.trials.Trial.record)."""

    trial: int
    step: str
    nodes: int
    firstNode: int
    lastNode: int
    buildId: str
    outcome: str | None
    stillFails: bool
    failure: Failure | None
    seconds: float
    reverted: JsonObject | None = None
    replayed: bool | None = None
    reused: bool | None = None


class MinimalModel(_Record):
    path: str
    nodes: int
    nodeNames: list[str]
    inputs: list[str]
    outputs: list[str]
    profiles: list[JsonObject]


class MinGood(_Record):
    path: str
    trial: int
    nodes: int
    step: str


class Smallest(_Record):
    nodes: int
    nodeNames: list[str]


class Verdict(_Record):
    outcome: str | None
    stillFails: bool


class ResumeState(_Record):
    """What `trtls reduce --resume` continues from (triage.resume)."""

    modelSha256: str | None
    recipeSha256: str | None
    failure: FailureSignature | None
    smallest: Smallest | None
    verdicts: dict[str, Verdict]


class ShapeProbeRecord(_Record):
    """How a reduction learned every tensor's shape (triage.probe.probe_shapes): `onnx_runtime`, one run per profile
    point, or `onnx_shape_inference`, the fallback when ONNX Runtime could not run the model (`reason`: its message,
    one line); `text` is the sentence the faces print."""

    probe: Literal["onnx_runtime", "onnx_shape_inference"]
    reason: str | None = None
    text: str
    declared: list[str] | None = None  # an unknown op's outputs whose shapes are the model's declaration, not inferred


class ReductionResult(_Record):
    """A reduction's result.json (triage.evidence.result_record); `evidenceError` only when it could not be
    written (TRT413)."""

    kind: Literal["reduction"]
    id: str
    engine: str
    recipe: str
    onnx: str
    outcome: str
    error: str | None
    errorCode: str | None
    headline: str
    rule: str
    shapeProbe: ShapeProbeRecord | None = None  # None before the probe ran (and in a record written before it existed)
    failRegex: list[str] | None
    failRegexFrom: str | None
    failure: FailureSignature | None
    failureText: str | None
    cause: str | None
    causeText: str
    causeSettings: JsonObject
    settingsNotTried: str | None
    stoppedBy: str | None
    stoppedDuringTrial: int | None
    trialsAtStop: int | None
    originalNodes: int
    minimalPath: str | None
    minimal: MinimalModel | None
    minGood: MinGood | None
    reusedBuild: str | None
    trialsUsed: int
    trialsBuilt: int
    resumedFrom: str | None
    resumeNote: str | None
    resume: ResumeState
    trialsByStep: dict[str, int]
    bisectBound: int
    trials: list[TrialRecord]
    evidenceError: str | None = None

    @property
    def found(self) -> bool:
        """A cause was found — a smaller failing model or a setting; a budget stop counts only with a smaller failing
        model found before it: what `trtls reduce`'s exit 0 and the editor's `ok` both mean."""
        return self.outcome in ("reduced", "configuration") or (self.outcome == "stopped" and self.minimal is not None)


class TensorDivergence(_Record):
    """A compared tensor (triage.diverge.TensorError.record): its errors are null when it overflowed."""

    tensor: str
    node: str
    op: str
    maxAbsError: float | None
    rangeError: float | None
    relL2: float | None
    nonFinite: int
    overflow: bool = False  # an older record: its errors are Infinity instead
    notCompared: int = 0  # elements where the reference is inf/NaN (an older record: not counted)
    withinTolerance: bool | None  # None: not_checked, no finite reference element to compare


class DivergenceRound(_Record):
    """One comparison of a search: the conversion with `excludeNodes` (a --fix round says why it excluded more:
    `reason`, `added`, `worseThanBefore`), or the candidate of two given models."""

    excludeNodes: list[str]
    reason: str | None = None
    added: list[str] | None = None
    convertedModel: str
    outputErrors: dict[str, float | None]
    outputRangeError: float | None = None
    worseThanBefore: bool | None = None
    outputsPass: bool  # the comparison's verdict (triage.diverge.Comparison.verdict), in the order it writes it
    outputsNotChecked: list[str] | None = None  # outputs with no finite reference element (older records: absent)
    firstDiverging: TensorDivergence | None
    next: list[TensorDivergence]
    tensors: list[TensorDivergence]


class TextEdit(_Record):
    """One edit of the recipe's text: `range` is [line, col, end line, end col], 0-based (triage.exclude_edit)."""

    range: list[int]
    newText: str


class RecipeEdit(_Record):
    """The quick fix that adds nodes to the conversion's `exclude_nodes` (triage.exclude_edit.exclude_nodes_fix)."""

    title: str
    edits: list[TextEdit]


class ParityCheck(_Record):
    """One check of gate 4 as the re-run records it; `stats` only for a `parity.tolerance` check, `waived` only
    when the recipe waives it."""

    name: str
    status: CheckStatus
    code: str
    message: str
    stats: JsonObject | None = None
    waived: str | None = None


class ParityRerun(_Record):
    """`parityRerun` of a `--route --fix` search: gate 4 run again with the fix (triage.parity_rerun.rerun_parity,
    triage.diverge_run). `status` says whether it ran (`decision`, `parityPasses`, `checks`), did not (`reason`)
    or was stopped; a route that deploys its ONNX adds the what-if bundle it ran on (`bundle`, `bundleSection`,
    `bundleIsTheConversion`). A search that excluded nothing writes only `gates`, `status` and `reason`."""

    gates: list[int]
    excludeNodesAdded: list[str] | None = None
    recipeEdit: RecipeEdit | None = None
    bundle: str | None = None
    bundleSection: str | None = None
    bundleIsTheConversion: bool | None = None
    status: Literal["ran", "not_run", "cancelled"]
    reason: str | None = None
    runtimeModel: str | None = None
    decision: Decision | None = None
    parityPasses: bool | None = None
    checks: list[ParityCheck] | None = None


class TensorrtLayers(_Record):
    """`tensorrt` of a `--tensorrt` search: the TensorRT engine's layer-wise comparison (triage.trt_layers in the
    child, triage.trt_layers_run in the parent). `compared` carries the engine's builder (`module`, `version`,
    `markedOutputs`, `engineBytes`) and the tensors as the ONNX Runtime search compares them; `not_checked` says
    why no engine could run here (`reason`, `detected`: where it was found, and the builder's facts when it was
    the runtime that refused the built engine); `cancelled` and `error` say why in `reason`."""

    status: Literal["compared", "not_checked", "cancelled", "error"]
    reason: str | None = None
    detected: str | None = None
    rule: str | None = None
    module: str | None = None
    version: str | None = None
    markedOutputs: int | None = None
    engineBytes: int | None = None
    outputsPass: bool | None = None
    outputsNotChecked: list[str] | None = None
    firstDiverging: TensorDivergence | None = None
    next: list[TensorDivergence] | None = None
    tensors: list[TensorDivergence] | None = None


class DivergenceResult(_Record):
    """A divergence search's record: of a conversion (triage.diverge_run), of two given models (`mode: models`,
    triage.diverge_pair) or of a search that could not run to its end (`error`, app.triage_runs, nothing written).
    divergence.json is this less `folder`, which says where it was written."""

    kind: Literal["divergence"]
    mode: Literal["models"] | None = None
    id: str
    engine: str | None
    route: str | None
    precisionTable: str | None = None
    precision: str | None = None
    reference: str | None = None
    candidate: str | None = None
    inputs: str | None = None
    rule: str | None = None
    rangeRtol: float | None = None
    outputTolerances: dict[str, dict[str, float]] | None = None
    firstDiverging: TensorDivergence | None
    proposal: dict[str, list[str]] | None = None
    fixAsked: bool | None = None
    fixed: bool | None = None
    excludeNodes: list[str] | None = None
    widened: list[str] | None = None
    cancelled: bool
    cancelSource: str | None = None
    error: str | None = None
    comparedTensors: int | None = None
    notCompared: int | None = None
    notComparedNames: list[str] | None = None
    rounds: list[DivergenceRound]
    ranHere: str | None = None
    parityRerun: ParityRerun | None = None
    tensorrt: TensorrtLayers | None = None
    folder: str | None = None
    evidenceError: str | None = None

    @classmethod
    def written(cls, record: dict[str, Any]) -> DivergenceResult:
        """The record a search of this process just built (JSON data): validated, so a writer that drifts from
        the model fails where it writes."""
        return cls.model_validate(record)


@dataclass(frozen=True)
class ResultProblem:
    """Why a triage record (a reduction's result.json, a search's divergence.json) could not be read as its model:
    its path, the field that is wrong (None: the file itself) and what is wrong."""

    path: Path
    field: str | None
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


def _model_of(model: type[TriageRecord], what: str, data: object, path: Path) -> TriageRecord | ResultProblem:
    """JSON data read from `path` as `model`, or the problem naming the first wrong field."""
    if not isinstance(data, dict):
        return ResultProblem(path, None, f"not {what} (not a JSON object)")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or None
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        got = json.dumps(first.get("input"), default=str)[:80]
        said = f"{where} is {got}: {first['msg']}" if where else first["msg"]
        return ResultProblem(path, where, f"not {what}: {said}{more}")


def _read(model: type[TriageRecord], what: str, path: Path, within: Path | None) -> TriageRecord | ResultProblem:
    from trtls.fs import UnreadableRecord, read_json_record

    try:
        data = read_json_record(path, limit=RECORD_LIMIT, within=within)
    except UnreadableRecord as exc:
        return ResultProblem(path, None, str(exc))
    return _model_of(model, what, data, path)


def read_reduction_result(path: Path, *, within: Path | None = None) -> ReductionResult | ResultProblem:
    """The result.json at `path`, read through the file door (a regular file, never a final symlink, at most
    RECORD_LIMIT bytes, inside `within` when given): the model, or the located problem of a missing or damaged one."""
    return _read(ReductionResult, "a reduction's result", path, within)


def read_divergence_result(path: Path, *, within: Path | None = None) -> DivergenceResult | ResultProblem:
    """The divergence.json at `path`, read as `read_reduction_result` reads a result.json."""
    return _read(DivergenceResult, "a divergence search's record", path, within)
