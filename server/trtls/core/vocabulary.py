"""The closed sets of words trtls writes into its events, evidence and replies, each declared once as a `Literal`.

Every other table takes its words from here: the event models (`core.events`), the wire (`core.wire`), the evidence
rules (`core.evidence`), the phase tree, the outcome kinds (`core.outcome`), the recipe's and the route's builder
module, the worker protocol's constants (`core.protocol`), and the tuples a check iterates (`*_WORDS` below, read
with `get_args`, so a tuple cannot list other words than its type). Standard library only: the build worker and the
store's fast path import it without pydantic.

A word added here reaches the JSON Schema and the extension's generated TypeScript through the models that use it
(`python -m trtls.schema.protocol`).
"""

from __future__ import annotations

from typing import Literal, get_args

# who asked a build to stop (the `cancel` control line's `source`; the evidence's `cancelSource`)
CancelSource = Literal["ide_stop", "ctrl_c", "ci_timeout", "service_shutdown", "api", "event_loop"]
# how a worker's build ended as the worker itself says it (`build_finished.outcome`)
WorkerEnd = Literal["built", "cancelled", "failed"]
# how a build that ran a worker ended, as the supervisor records it (forced: the cancel was ignored, the worker
# terminated; killed: the worker died by itself, or with its supervisor)
Outcome = Literal[WorkerEnd, "forced", "killed"]
# a build that started no worker: its engine from the engine store, or a known-good engine restored on request
NoWorkerOutcome = Literal["reused", "rolled_back"]
BuildOutcome = Literal[Outcome, NoWorkerOutcome]
# how a face should tell a finished run (core.outcome's tables map each outcome to one)
OutcomeKind = Literal["ok", "cancelled", "failed", "refused"]
# a phase of the builder's tree, and how a phase_finish event may end one
PhaseStatus = Literal["running", "done", "cancelled", "failed"]
PhaseEnd = Literal["done", "cancelled"]
# the timing cache's decision for one build (builds.timing_cache)
CacheDecision = Literal["cold", "reused", "updated", "discarded", "quarantined", "not_applicable"]
# what became of the files a stopped build had started (the worker's `cleanup_status`)
CleanupStatus = Literal["cleaned", "quarantined", "failed", "not_needed"]
# the evidence's `cleanupStatus`: a run that started no worker had nothing of a worker's to clean
RecordCleanupStatus = Literal[CleanupStatus, "not_applicable"]
RetryPolicy = Literal["not_needed", "retry_cold", "retry_with_cache", "rollback", "investigate"]
ValidationStatus = Literal["not_applicable", "pending", "pass", "fail"]
Language = Literal["python", "cpp"]
# the TensorRT Python modules a worker can build with, and what a recipe may ask for (`auto`: whichever is there,
# full TensorRT first)
BuilderModule = Literal["tensorrt", "tensorrt_rtx"]
BuilderPreference = Literal["auto", BuilderModule]

CANCEL_SOURCES: tuple[str, ...] = get_args(CancelSource)
OUTCOMES: tuple[str, ...] = get_args(Outcome)
NO_WORKER_OUTCOMES: tuple[str, ...] = get_args(NoWorkerOutcome)
BUILD_OUTCOMES: tuple[str, ...] = get_args(BuildOutcome)
PHASE_STATUSES: tuple[str, ...] = get_args(PhaseStatus)
CACHE_DECISIONS: tuple[str, ...] = get_args(CacheDecision)
CLEANUP_STATUSES: tuple[str, ...] = get_args(RecordCleanupStatus)
RETRY_POLICIES: tuple[str, ...] = get_args(RetryPolicy)
VALIDATION_STATUSES: tuple[str, ...] = get_args(ValidationStatus)
LANGUAGES: tuple[str, ...] = get_args(Language)
BUILDER_MODULES: tuple[str, ...] = get_args(BuilderModule)  # in `auto`'s order of preference
BUILDER_PREFERENCES: tuple[str, ...] = get_args(BuilderPreference)
NOT_APPLICABLE = "not_applicable"  # a field about a builder run, in the record of a run that started none
