"""What the language server sends its client beyond LSP itself: the `trtls/buildTree` notification, the extra
fields of a `$/progress` end, and the reply of every `workspace/executeCommand` command. Declared once, here, and
sent from here: the server constructs each reply and notification as its model and `to_wire` makes it JSON (a
handler never returns a hand-made dict; lsp/server.py's `command` passes every reply through `reply`).

docs/protocol.md's tables, docs/protocol.schema.json and extension/src/generated/protocol.ts are generated from
these models (`python -m trtls.schema.protocol`; tests/test_protocol_generated.py fails when a file drifts), and
tests/lsp/test_wire_commands.py drives all 16 commands over a real server's stdio and checks every reply and
notification against them: a field the server sends that is not declared here fails there (extra="forbid"), and so
does one the model would send that the server left out. The worker's job is declared beside the worker's events, in
trtls.core.worker_job.

The words (`detail`, `description`, `verdict` …) are trtls.core.display's: the extension shows them as they come.
"""

from __future__ import annotations

from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, RootModel

from trtls.core.outcome import OutcomeKind
from trtls.core.vocabulary import BuildOutcome, PhaseStatus  # a worker's outcome, or reused / rolled_back

BUILD_TREE = "trtls/buildTree"  # the notification's method (BuildTree | MatrixTree)
# what a run of the registry (trtls.builds.supervisor.runs) is: a build (a matrix cell, a reduction's trial, a reuse or
# a
# rollback are builds too), a matrix or farm run, a gates run, a reduction, a divergence search (lsp/run_kinds.py)
RunKind = Literal["build", "matrix", "gates", "reduction", "divergence"]


class _Wire(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PhaseRow(_Wire):
    """One phase of a build's tree (also the evidence's `phaseTree`, tree.json)."""

    id: str  # position in the tree: dotted sibling indexes
    parentId: str | None
    name: str
    numSteps: int
    step: int | None  # TensorRT's 0-based index of the last completed step
    status: PhaseStatus
    elapsedS: float
    startS: float  # seconds after the build's start
    baselineS: float | None  # the usual duration from earlier builds of the same config
    quietForS: float | None  # the builder's silence, measured, on running phases
    quietS: float | None  # the same silence when it is worth showing, else null
    stalled: bool  # the stall rule (trtls.core.phase_tree.is_stalled)
    foldedInto: str | None  # id of the first phase of the folded row this phase is shown in
    stepsText: str | None  # `2/3`; null on a finished phase
    detail: str  # the row after the name: `2/3 · 4.1 s · quiet 42 s · usual 30 s · stalled`
    groupLabel: str | None  # on the first phase of a folded row: `Computing reformatting costs ×26`
    groupDetail: str | None  # and `0.4 s in all`


class NodeView(_Wire):
    """Where a farm cell is: the node that holds it, or (`waitingS` alone) how long it has waited for one."""

    nodeId: str | None = None
    hostname: str | None = None
    labels: dict[str, str] = {}
    acceleratorType: str | None = None
    gpuIds: list[str] = []
    queueWaitS: float | None = None
    warmWorker: bool = False
    numGpus: float | None = None  # GPUs the cell holds there (core.farm.gpu_choice)
    gpuRule: str | None = None  # and why
    cudaVisibleDevices: str | None = None  # as Ray set it for the node worker
    waitingS: float | None = None


class BuildTree(_Wire):
    """`trtls/buildTree` for one build (or one matrix cell): sent while it runs (≤ 5 a second) and once at its end."""

    uri: str  # the recipe's document
    buildId: str
    engine: str
    status: str  # the server's word: starting, running, waiting for a node, then the outcome
    running: bool
    cancelSource: str | None
    outcome: BuildOutcome | None
    outcomeKind: OutcomeKind | None
    outcomeMessage: str | None  # `built in 3.2 s`, `cancelled by ide_stop`, `failed: …`
    rebuiltBecause: str | None = None  # `rebuilt because: optimization_level 3 → 5` (core.display.rebuilt_text)
    elapsedS: float
    elapsedText: str  # `4.1 s`
    timeLeft: str | None = None  # running: `~40 s left, 25–60 s` or `no estimate`, the progress message's words
    description: str  # the row: `building · 4.1 s`; a cell adds where it runs
    where: str  # `local`, `node gpu-3 (1a2b3c4d5e6f) · GPU 0 · L4`, `waiting for a node 4.0 s`
    evidencePath: str | None
    phases: list[PhaseRow]  # in start order, which is the row order of every face: the client never reorders them
    phasesDelta: bool = False  # `phases` holds only the phases that changed since this build's last notification
    cell: str | None  # the matrix cell's name
    parentId: str | None  # the matrix this build is a cell of
    node: NodeView | None  # a farm cell's node


class CellRow(_Wire):
    """A cell as its matrix lists it (the cell's own notification carries its phases)."""

    buildId: str | None  # null: not started (the run was stopped first)
    cell: str
    engine: str
    status: str
    description: str
    message: str | None = None
    node: NodeView | None = None
    cancelSource: str | None = None


class MatrixProgress(_Wire):
    done: int  # cells that ended, any way
    total: int  # cells planned


class MatrixTree(_Wire):
    """`trtls/buildTree` for the parent row of a matrix or farm run."""

    uri: str
    buildId: str
    engine: str  # the run's title
    kind: Literal["matrix"]
    status: str
    running: bool
    outcome: BuildOutcome | None  # the worst outcome of its cells
    outcomeKind: OutcomeKind | None
    outcomeMessage: str | None  # `3 built, 1 failed`
    cancelSource: str | None
    elapsedS: float
    elapsedText: str
    progress: MatrixProgress
    cellsText: str  # `3/4 cells done`
    description: str  # `3/4 cells done · building · 12 s`
    evidencePath: str | None
    cells: list[CellRow]


class ProgressEnd(_Wire):
    """The `value` of a build's, a matrix's or a gates run's `$/progress` end: LSP's `message` plus the outcome as data
    (extra properties every LSP client ignores and the extension renders)."""

    kind: Literal["end"]
    message: str
    outcome: str
    outcomeKind: OutcomeKind


# -- command replies (workspace/executeCommand) ----------------------------------------------------------------------
class BuildEngineReply(_Wire):
    """`trtls.buildEngine {uri, engine, retry?}`. `reused`: the engine came from the engine store, no worker started
    (docs/store.md; `buildId` names the reuse's evidence); `store_error`: the store cannot be used (TRT330/TRT331)."""

    buildId: str | None
    engine: str
    status: Literal["started", "already_building", "invalid_recipe", "reused", "store_error"]
    errors: list[str] = []
    message: str | None = None  # reused: "up to date — engine from build demo-… 2 h ago"
    engineKey: str | None = None
    reusedFrom: dict[str, Any] | None = None  # the producing build: buildId, startedAt, durationS, storeEntry
    evidencePath: str | None = None


class MatrixCellPlan(_Wire):
    cell: str
    engine: str


class ReusedCell(_Wire):
    """A matrix cell the engine store served: no worker, no node; `buildId` names the reuse's evidence."""

    cell: str
    engine: str
    buildId: str
    message: str | None  # "up to date — engine from build demo-… 2 h ago"
    evidencePath: str | None


class BuildMatrixReply(_Wire):
    """`trtls.buildMatrix {uri, engine?, cell?, matrix?}`. Every cell is looked up in the engine store first: `cells`
    are the ones that build (under `buildId`), `reused` the ones restored from the store; `reused` as the status:
    every cell was, and no run started (`buildId` null)."""

    buildId: str | None
    status: Literal["started", "refused", "invalid_recipe", "reused"]
    errors: list[str] = []
    cells: list[MatrixCellPlan] = []
    reused: list[ReusedCell] = []


class BuildEngineResult(RootModel[BuildEngineReply | BuildMatrixReply]):
    """What `trtls.buildEngine` answers: a build's reply, or (the recipe has a `[cluster]`) the farm run's of that
    one cell, as trtls.buildMatrix answers it."""


class CancelBuildReply(_Wire):
    """`trtls.cancelBuild {buildId, source?}`: what the stop cut (trtls.app.stop); `accepted`: it cut something."""

    buildId: str
    accepted: bool
    status: str
    stopped: Literal["run", "upload", "nothing"]  # the run; only a built engine's upload to the remote store; nothing
    message: str  # what the stop cut, in a sentence (`demo is built already; stopping the upload of its engine …`)


class ListedBuild(_Wire):
    """One run as trtls.listBuilds lists it, whatever its kind (lsp/run_kinds.py decides each kind's row)."""

    buildId: str
    engine: str  # the engine; a matrix's title; a gates run's route; a divergence search on a route: the route
    uri: str | None
    status: str
    cancelSource: str | None
    kind: RunKind = "build"
    elapsedS: float | None = None
    evidencePath: str | None = None  # the evidence record's file, once it exists (what trtls.showEvidence answers)
    hasReport: bool = False  # trtls.buildReport has a page for it: a finished build or matrix (no gates run, no triage)
    parentId: str | None = None  # the matrix of a cell, the reduction of a trial
    cell: str | None = None
    cells: list[str] = []  # a matrix's cell builds
    route: str | None = None  # a gates run's or a divergence search's route
    headline: str | None = None  # a reduction's or divergence search's state: `reduce demo · trial 7 · 244 → 1 nodes`
    evidenceError: str | None = None  # why the record could not be written (TRT413); then no evidencePath


class ListBuildsReply(_Wire):
    """`trtls.listBuilds {}`"""

    builds: list[ListedBuild]


class EvidenceReply(_Wire):
    """`trtls.showEvidence {buildId}`: the finished run's evidence file and its content — a build's or a matrix's
    summary.json, a gates run's summary, a reduction's result.json, a divergence search's divergence.json."""

    buildId: str
    kind: RunKind = "build"
    path: str | None  # null: the record could not be written (a reduction's `evidenceError` says why)
    summary: dict[str, Any] | None = None  # the record


class BuildReportReply(_Wire):
    """`trtls.buildReport {buildId}`: the finished build's or matrix's self-contained HTML report (also written as
    report.html). A gates run, a reduction or a divergence search has none: the answer is a -32602 error naming its
    evidence (see `hasReport` in trtls.listBuilds)."""

    buildId: str
    path: str
    html: str


class ListTargetsReply(_Wire):
    """`trtls.listTargets {uri}`"""

    engines: list[str]
    routes: list[str]


class GateCheck(_Wire):
    gate: int
    name: str
    status: str
    code: str | None
    message: str


class GatesVerdict(_Wire):
    """How a gates run ends, in words (trtls.core.display.gates_verdict): the extension shows `text` at `level`."""

    outcome: str
    outcomeKind: OutcomeKind
    level: Literal["info", "warning"]
    text: str  # `route tiny: supported`, `route lic: reject — see Problems`, `route slow: gates cancelled — …`
    showProblems: bool


class RunGatesReply(_Wire):
    """`trtls.runGates {uri, route, gates?}`"""

    route: str
    decision: Literal["supported", "hold", "reject"] | None
    verdict: GatesVerdict
    runId: str | None = None  # the run in the registry (trtls.cancelBuild takes it); absent when it did not start
    stopped: bool = False
    status: str | None = None  # `invalid_recipe` when it did not run
    errors: list[str] = []
    checks: list[GateCheck] = []
    summaryPath: str | None = None


class LockRouteReply(_Wire):
    """`trtls.lockRoute {uri, route}` (after the user confirms)"""

    route: str
    locked: bool
    status: str | None = None
    reason: str | None = None
    files: int | None = None
    commit: str | None = None


class AllowLicenseReply(_Wire):
    """`trtls.allowLicense {uri, route, license}` (after the user confirms)"""

    applied: bool


class DebugInformationReply(BaseModel):
    """`trtls.printDebugInformation {}`: `text` for people; the same facts as fields (open-ended: a probe's)."""

    model_config = ConfigDict(extra="allow")
    text: str


NOTIFICATIONS: dict[str, tuple[type[BaseModel], ...]] = {
    BUILD_TREE: (BuildTree, MatrixTree),
    "$/progress (end)": (ProgressEnd,),
}


class ReduceEngineReply(_Wire):
    """`trtls.reduceEngine {uri, engine, maxTrials?}`: the reduction started (docs/triage.md); its result is TRT980"""

    reductionId: str
    engine: str
    status: Literal["started"]


class FindDivergenceReply(_Wire):
    """`trtls.findDivergence {uri, engine | route, fix?}`: the search started (a stoppable run: trtls.cancelBuild
    {buildId: divergenceId}); its result is TRT981, with the `exclude_nodes` quick fix (docs/triage.md)"""

    divergenceId: str
    engine: str | None  # null: a route that deploys its ONNX (converted by [routes.X.precision]), no engine table
    route: str | None = None
    status: Literal["started"]


class BuildMinimalReply(_Wire):
    """`trtls.buildMinimal {uri, reductionId, engine}`: a build of the reduction's minimal model"""

    buildId: str
    engine: str
    status: Literal["started"]


class ShowDocumentReply(_Wire):
    """`trtls.showDocument {path}`: a file trtls wrote under .trtls/, opened by the client"""

    shown: bool


class RollbackEngineReply(_Wire):
    """`trtls.rollbackEngine {uri, engine, to?}`: a known-good engine restored from the store (docs/store.md)"""

    buildId: str
    engine: str
    status: Literal["rolled_back"]
    message: str
    rolledBackTo: dict[str, Any]


COMMAND_REPLIES: dict[str, type[BaseModel]] = {
    "trtls.buildEngine": BuildEngineResult,
    "trtls.buildMatrix": BuildMatrixReply,
    "trtls.cancelBuild": CancelBuildReply,
    "trtls.listBuilds": ListBuildsReply,
    "trtls.showEvidence": EvidenceReply,
    "trtls.buildReport": BuildReportReply,
    "trtls.listTargets": ListTargetsReply,
    "trtls.runGates": RunGatesReply,
    "trtls.lockRoute": LockRouteReply,
    "trtls.allowLicense": AllowLicenseReply,
    "trtls.printDebugInformation": DebugInformationReply,
    "trtls.reduceEngine": ReduceEngineReply,
    "trtls.findDivergence": FindDivergenceReply,
    "trtls.buildMinimal": BuildMinimalReply,
    "trtls.showDocument": ShowDocumentReply,
    "trtls.rollbackEngine": RollbackEngineReply,
}


def to_wire(model: BaseModel) -> dict[str, Any]:
    """The JSON object a model is on the wire: every declared field, the ones left at their default included."""
    return dict(model.model_dump(mode="json"))


def reply_models(command: str) -> tuple[type[BaseModel], ...]:
    """The models a command may answer: its declared reply, or the members of its union (BuildEngineResult)."""
    declared = COMMAND_REPLIES[command]
    return get_args(declared.model_fields["root"].annotation) if issubclass(declared, RootModel) else (declared,)


def reply(command: str, answer: BaseModel) -> dict[str, Any]:
    """A command's reply as it goes out: an instance of its reply model, constructed by its handler — a hand-made
    dict or another command's model raises here (a -32603 for the client) instead of being coerced into shape."""
    if not isinstance(answer, models := reply_models(command)):
        raise TypeError(f"{command} answered {type(answer).__name__}, not {' | '.join(m.__name__ for m in models)}")
    return to_wire(answer)
