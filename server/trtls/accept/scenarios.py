"""The named scenarios of the stuck-build acceptance test: what each proves, what it does not, how its fault
is produced (real or simulated), the criteria it sets out to measure and the evidence fields it checks.

`fast` is the CI subset; `all` is every scenario. docs/reliability.md's scenario table is generated from
this list (`reliability_table`); a test fails when the document drifts from it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from trtls.accept import artifact_scenarios, faults, runner, stop_scenarios
from trtls.accept.criteria import Observation

ALL_CRITERIA = ("1", "2", "3", "4", "5", "6", "7", "8")
NO_CANCEL = ("1", "2", "4", "5", "7", "8")  # a build that is not stopped: nothing to acknowledge or retry


@dataclass(frozen=True)
class Scenario:
    name: str
    run: Callable[[runner.Context], Observation]
    proves: str
    does_not_prove: str
    fault: str  # "real" | "simulated" (what this scenario does when the machine allows)
    how: str  # how the fault or condition is produced
    criteria: tuple[str, ...]  # the criteria it measures; the others are n/a
    evidence: tuple[str, ...] = ()  # evidence fields it checks beyond the runbook's
    fast: bool = False


SCENARIOS: tuple[Scenario, ...] = (
    Scenario(
        "cold_cache",
        artifact_scenarios.sc_cold_cache,
        "a first build with no cache, no history and no previous engine is observable and succeeds",
        "that any later build is faster: durations vary with load and are not compared",
        "real",
        "a bare copy of the folder: no .trtls, no engine, no timing cache",
        NO_CANCEL,
        ("timingCache.reason", "phaseTree"),
        True,
    ),
    Scenario(
        "deep_tactics",
        faults.sc_deep_tactics,
        "a deeper tactic search (optimization level 5), shown by phase and step counts to change the builder's "
        "work here, stops cooperatively on an API cancel",
        "anything when the deeper setting does not change the builder's work on this machine: the scenario then "
        "reports that it cannot be reproduced here (not_checked), with the counts it measured",
        "real",
        "a probe build at level 5 compared with the template build (phases, declared steps); then an API cancel",
        ALL_CRITERIA,
        ("effectiveSettings", "phaseTree"),
    ),
    Scenario(
        "network_change",
        artifact_scenarios.sc_network_change,
        "another network (new weights) gets another buildConfigHash, so old baselines are never applied to it",
        "that the timing cache is invalidated: TensorRT caches are keyed per layer and may be shared across networks",
        "real",
        "the ONNX weights change between builds",
        NO_CANCEL,
        ("buildConfigHash",),
    ),
    Scenario(
        "typed_network_change",
        faults.sc_typed_network_change,
        "a strongly-typed network whose input/output types change between builds is recorded with its new types "
        "and a new buildConfigHash; no usual duration from the old network is shown",
        "that the engine is numerically right in float16: nothing runs it here",
        "real",
        "the ONNX's float32 inputs and outputs retyped to float16 with Cast nodes at the boundary",
        NO_CANCEL,
        ("network.stronglyTyped", "network.inputs", "network.outputs", "buildConfigHash"),
    ),
    Scenario(
        "new_gpu_target",
        artifact_scenarios.sc_new_gpu_target,
        "another compute capability (SM89 → SM120) changes the build target, the buildConfigHash and the cache "
        "identity, and a cache made for the old target is not reused",
        "a build on a new physical GPU: there is no GPU here; the target is a TensorRT-RTX setting",
        "real",
        'compute_capabilities ["SM89"] then ["SM120"], with the SM89 cache left in place',
        NO_CANCEL,
        ("target", "timingCache.identity", "buildConfigHash"),
    ),
    Scenario(
        "slow_settings",
        faults.sc_slow_settings,
        "a build slowed by its settings is stopped by the real CI timer (`trtls build --timeout`), exit 124",
        "that these settings slow the build on this machine (TensorRT-RTX on the CPU times no tactics)",
        "real",
        "optimization_level 4 + avg_timing_iterations 16 in the recipe; `trtls build --timeout` at half the "
        "template build's time",
        ALL_CRITERIA,
    ),
    Scenario(
        "ctrl_c",
        stop_scenarios.sc_ctrl_c,
        "SIGINT to `trtls build` reaches the worker as a cooperative cancel (exit 130) with measured latencies",
        "a keystroke in a terminal (tests/builds has the pseudo-terminal test)",
        "real",
        "SIGINT to a running `trtls build --json` process mid-build",
        ALL_CRITERIA,
        ("cancelLatencyMs", "cleanupLatencyMs"),
        True,
    ),
    Scenario(
        "api_cancel",
        stop_scenarios.sc_api_cancel,
        "a programmatic cancel (Build.cancel('api')) is acknowledged, cleaned up and measured",
        "the latency distribution (one sample; docs/performance.md has 100)",
        "real",
        "Build.cancel('api') at the middle phase",
        ALL_CRITERIA,
        ("cancelLatencyMs",),
        True,
    ),
    Scenario(
        "service_shutdown",
        faults.sc_service_shutdown,
        "SIGTERM to a running `trtls build` (a service manager stopping it) cancels cooperatively with source "
        "service_shutdown and writes the evidence before exiting",
        "a systemd unit's stop timeout: only the signal is sent",
        "real",
        "SIGTERM to a running `trtls build --json` process mid-build",
        ALL_CRITERIA,
    ),
    Scenario(
        "server_shutdown",
        faults.sc_server_shutdown,
        "SIGTERM to a running language server stops its build cooperatively (service_shutdown) and the server "
        "writes the evidence before it exits",
        "an editor's own shutdown sequence (that is LSP shutdown/exit, tested in tests/lsp)",
        "real",
        "SIGTERM to `trtls serve` (real stdio server) while it builds through trtls.buildEngine",
        ALL_CRITERIA,
        (),
        True,
    ),
    Scenario(
        "ide_stop",
        stop_scenarios.sc_ide_stop,
        "the editor's Stop (window/workDoneProgress/cancel through the real language server over stdio) cancels "
        "the build",
        "the VS Code button itself (.ci/e2e drives the real editor)",
        "real",
        "window/workDoneProgress/cancel on the build's progress token, from a raw JSON-RPC client",
        ALL_CRITERIA,
        (),
        True,
    ),
    Scenario(
        "event_loop",
        stop_scenarios.sc_event_loop,
        "cancelling the asyncio task awaiting a build cancels the build (source event_loop)",
        "cancellation from other event loops (trio, Qt)",
        "real",
        "Task.cancel() on the task awaiting Build.wait()",
        ALL_CRITERIA,
    ),
    Scenario(
        "worker_sigkill",
        stop_scenarios.sc_worker_sigkill,
        "a worker that dies is recorded as killed, never as cancelled; its leftovers are cleaned; the advice is "
        "investigate (no blind retry); the evidence says whether the OOM killer acted",
        "a real out-of-memory kill: the harness sends the SIGKILL, so the OOM verdict here is 'no'",
        "simulated",
        "SIGKILL to the worker mid-build (standing in for the OOM killer or a crash)",
        ("1", "2", "3", "4", "5", "7", "8"),
        ("resources.peakRssBytes", "resources.oom"),
        True,
    ),
    Scenario(
        "silent_builder",
        stop_scenarios.sc_silent_builder,
        "a builder silent past the grace is terminated and recorded as forced, never as cooperative",
        "a real minutes-long silent tactic-timing phase (none exists on this CPU)",
        "simulated",
        "fault `stall`: a phase_start callback blocks 60 s; a cancel when it starts; grace 1 s",
        ALL_CRITERIA,
        ("forced",),
        True,
    ),
    Scenario(
        "disk_full",
        faults.sc_disk_full,
        "a filesystem that fills while the engine is written fails the build (ENOSPC), leaves no partial file, "
        "keeps the previous engine byte-for-byte, and the advice (rollback) keeps and verifies it",
        "a disk that fills during the build's own reads; quotas",
        "real",
        "a tmpfs (previous engine + half a new one) over the output folder in a private mount namespace "
        "(`unshare -m`, needs root); otherwise simulated with RLIMIT_FSIZE and the report says so",
        ("1", "2", "4", "5", "6", "7", "8"),
        ("error", "previousEngineIntact"),
        True,
    ),
    Scenario(
        "readonly_output",
        artifact_scenarios.sc_readonly_output,
        "an unwritable output folder is found before the build spends any time (TRT405), and the previous engine "
        "is kept and verified (rollback)",
        "a folder that becomes read-only during the build",
        "real",
        "`chattr +i` on the output folder (root ignores permission bits); `chmod 0555` when not root",
        ("4", "5", "6", "7", "8"),
        ("outputCheck", "error"),
    ),
    Scenario(
        "corrupted_cache",
        faults.sc_corrupted_cache,
        "a timing cache trtls did not write (random bytes, no sidecar) is reported honestly: what the builder "
        "could tell, the file left unverified (or quarantined when TensorRT flags it), no raw ERROR lines",
        "that TensorRT-RTX detects corruption: it ignores timing caches and cannot deserialise one without a device",
        "real",
        "3000 random bytes at the cache path, no sha256 sidecar",
        NO_CANCEL,
        ("timingCache.reason", "logs"),
        True,
    ),
    Scenario(
        "tampered_cache",
        artifact_scenarios.sc_tampered_cache,
        "a cache trtls wrote and someone changed afterwards is caught by its sha256 sidecar, quarantined, and "
        "the build runs cold",
        "detection of a cache without a sidecar (that is corrupted_cache)",
        "real",
        "real TensorRT-RTX cache bytes saved by save_merged (with sidecar), then truncated and flipped",
        NO_CANCEL,
        ("timingCache.quarantined_to",),
        True,
    ),
    Scenario(
        "concurrent_cache",
        artifact_scenarios.sc_concurrent_cache,
        "two processes saving the same cache at once leave a file that matches its sidecar digest and lose no "
        "merged record",
        "TensorRT's own combine(): TensorRT-RTX's timing caches are no-ops, so the merge is a union of records",
        "real",
        "two processes × 40 save_merged calls on one cache at once, then a build",
        NO_CANCEL,
    ),
    Scenario(
        "server_killed",
        stop_scenarios.sc_server_killed,
        "a language server killed mid-build: a new server finds the orphan, stops and cleans it, records outcome "
        "killed and tells the user",
        "recovery after a machine reboot (the worker dies too)",
        "real",
        "SIGKILL to `trtls serve` mid-build, then a new server on the same folder",
        ("1", "2", "3", "4", "5", "7", "8"),
    ),
)
BY_NAME = {s.name: s for s in SCENARIOS}
GROUPS = {"fast": [s.name for s in SCENARIOS if s.fast], "all": [s.name for s in SCENARIOS]}


def select(spec: str | None) -> list[Scenario]:
    """`fast`, `all`, or a comma-separated list of names (groups may be mixed in); None (no `--scenarios`) is `fast`.
    ValueError on an unknown name, and on a list that names none (`--scenarios ''` ran the default real builds)."""
    names: list[str] = []
    for part in ("fast" if spec is None else spec).split(","):
        part = part.strip()
        if not part:
            continue
        if part in GROUPS:
            names.extend(GROUPS[part])
        elif part in BY_NAME:
            names.append(part)
        else:
            raise ValueError(f"unknown scenario {part!r}; known: {', '.join(BY_NAME)} (groups: fast, all)")
    seen: list[str] = []
    for n in names:
        if n not in seen:
            seen.append(n)
    if not seen:
        raise ValueError("no scenario selected")
    return [BY_NAME[n] for n in seen]


def reliability_table() -> str:
    """docs/reliability.md's one table, from the list above."""
    from trtls.core.evidence import SEED_FIELDS

    rows = [
        "| scenario | fast | fault | how | criteria measured | evidence fields checked |",
        "|---|---|---|---|---|---|",
    ]
    for s in SCENARIOS:
        crit = ", ".join(s.criteria)
        fields = (
            "the runbook's " + str(len(SEED_FIELDS)) + (" + `" + "`, `".join(s.evidence) + "`" if s.evidence else "")
        )
        rows.append(f"| `{s.name}` | {'✓' if s.fast else ''} | {s.fault} | {s.how} | {crit} | {fields} |")
    return "\n".join(rows) + "\n"
