"""The job: the first line a supervisor writes on a worker's stdin (`trtls.events/1`, docs/protocol.md § Job).

It is the contract an external worker (a recipe's `worker = [...]`) implements, so it is declared here, beside the
events (trtls.core.events) and the control line (`CancelControl`) the same processes exchange; docs/protocol.md's
job table, docs/protocol.schema.json and the extension's types are generated from it (trtls.schema.protocol).

trtls.builds.supervisor.job.worker_job writes the job as a plain dict, and the built-in worker reads it as one: the
worker
never imports pydantic (its start-up is paid on every build, tests/test_layers.py). tests/lsp/test_wire_job.py
validates the job a real build sends against `WorkerJob` (extra="forbid": a key the job gains without being
declared here fails there).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from trtls.core.build_config import PrecisionSettings


class _Job(BaseModel):
    model_config = ConfigDict(extra="forbid")


class JobTimingCache(_Job):
    """The engine's timing cache (`[engines.NAME] timing_cache`), its path absolute."""

    path: str  # the cache file
    mode: Literal["off", "read", "read_write"]  # read: reuse a valid cache, never write; read_write: also merge back
    write_root: str  # the folder the cache's write must stay inside (judged at load: a symlinked folder is refused)


class JobShapes(_Job):
    """One input's shapes in one optimization profile."""

    input: str  # the network input's name
    min: list[int]
    opt: list[int]
    max: list[int]


class JobProfile(_Job):
    """One TensorRT optimization profile: the shapes of every dynamic input. A worker adds the profiles in order, so
    profile `i` of the recipe is profile `i` of the engine."""

    inputs: list[JobShapes]


class JobPrecision(PrecisionSettings):
    """`[engines.NAME.precision]` as the recipe gives it, and where the precision step caches its output."""

    cache_dir: str  # the precision step's cache (by content), under the recipe's .trtls/


class JobPlugins(_Job):
    """`[engines.NAME.plugins]` with every path made absolute."""

    libraries: list[str]  # plugin libraries (.so) to load into the builder
    serialize: list[str]  # the libraries to ship inside the engine (each is also in `libraries`)
    require_creators: list[str]  # creators that must be registered once the libraries are loaded: "Name[@version]"


class JobStall(_Job):
    """A builder that goes silent: the worker blocks inside a phase_start."""

    at_phase: int  # block inside the n-th phase_start
    seconds: float  # for this long: a builder silent past the grace


class JobFaults(_Job):
    """Fault injection for the acceptance tests only: never set from a recipe."""

    stall: JobStall | None = None
    fsize_limit_bytes: int | None = None  # a disk that fills while the engine is written (EFBIG)
    skip_cleanup: bool = False  # proves the acceptance test catches a missing cleanup
    commit_delay_s: float = 0  # a slow disk: the wait before the engine's rename


class WorkerJob(_Job):
    """The first stdin line of a worker: one build, every path absolute. Then come control lines (`CancelControl`,
    `CommitControl`)."""

    v: Literal[1]  # the protocol's version (trtls.core.protocol.PROTOCOL_VERSION)
    type: Literal["job"]
    build_id: str  # the build's id: its events and evidence folder carry it
    engine: str  # the engine's name in the recipe
    onnx: str  # the model to build
    output: str  # the engine file to write, atomically (a temp name beside it, then a rename)
    # the folder the engine's write and rename must stay inside, judged when the recipe was loaded (a folder swapped
    # for a symlink since is refused); a farm node's own scratch folder on a node
    write_root: str
    timing_cache: JobTimingCache | None  # null: none (or a farm node, where the cache is not shipped)
    # flat: every key of `[engines.NAME.builder]` and of its `memory_pool_limits`, null = the module's default; what a
    # worker cannot apply goes into `effective_settings.not_applied`, never silently dropped (docs/build-config.md)
    settings: dict[str, Any]
    profiles: list[JobProfile]  # in the recipe's order (workers also accept the older one-input item)
    precision: JobPrecision  # `convert` asks for the precision step (ModelOpt AutoCast) before TensorRT, as phase "0"
    plugins: JobPlugins
    builder_module: str  # `auto`, `tensorrt_rtx` or `tensorrt`: the Python module the built-in worker imports
    keep_evidence: bool  # on a failure, keep the partial engine in `quarantine_dir` (else it is removed)
    quarantine_dir: str
    faults: JobFaults  # `{}` except in the acceptance tests
    no_monitor: bool  # build without a progress monitor (benchmarks compare against it)
    # sent before the supervisor checked the recipe (the built-in worker only): build, but write nothing (no engine
    # temp, no rename, no cache) until a `CommitControl` line; a cancel or stdin closing instead discards the build
    hold_commit: bool = False
