"""The named fault-injection scenarios of the stuck-build acceptance test (each reproducible).

`fast` is the CI subset; `all` is every scenario. Each entry says what a pass proves.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from trtls.accept import artifact_scenarios, runner, stop_scenarios
from trtls.accept.criteria import Observation


@dataclass(frozen=True)
class Scenario:
    name: str
    run: Callable[[runner.Context], Observation]
    proves: str
    fast: bool = False


SCENARIOS: tuple[Scenario, ...] = (
    Scenario(
        "cold_cache",
        artifact_scenarios.sc_cold_cache,
        "a first build with no cache, no history and no previous engine is observable and succeeds; the second build "
        "shows usual durations",
        True,
    ),
    Scenario(
        "deep_tactics",
        stop_scenarios.sc_deep_tactics,
        "a build at optimization level 5 (deepest tactic search) stops cooperatively on an API cancel",
    ),
    Scenario(
        "network_change",
        artifact_scenarios.sc_network_change,
        "another network gets another buildConfigHash, so old baselines are never applied to it",
    ),
    Scenario(
        "new_gpu_target",
        artifact_scenarios.sc_new_gpu_target,
        "another compute capability (SM89 → SM120) changes the cache identity and a cache made for the old target is "
        "not reused",
    ),
    Scenario(
        "slow_settings",
        stop_scenarios.sc_slow_settings,
        "a build slowed by its settings (level 4, 16 timing iterations) stops on a CI timeout cancel",
    ),
    Scenario(
        "ctrl_c",
        stop_scenarios.sc_ctrl_c,
        "SIGINT to `trtls build` reaches the worker as a cooperative cancel (exit 130) with measured latencies",
        True,
    ),
    Scenario(
        "api_cancel",
        stop_scenarios.sc_api_cancel,
        "a programmatic cancel (Build.cancel('api')) is acknowledged, cleaned up and measured",
        True,
    ),
    Scenario(
        "service_shutdown",
        stop_scenarios.sc_service_shutdown,
        "Supervisor.shutdown() stops running builds cooperatively",
    ),
    Scenario(
        "ide_stop",
        stop_scenarios.sc_ide_stop,
        "the editor's Stop (window/workDoneProgress/cancel through the real language server over stdio) cancels the "
        "build",
        True,
    ),
    Scenario(
        "event_loop",
        stop_scenarios.sc_event_loop,
        "cancelling the asyncio task awaiting a build cancels the build (source event_loop)",
    ),
    Scenario(
        "worker_sigkill",
        stop_scenarios.sc_worker_sigkill,
        "a worker that dies (SIGKILL) is recorded as killed, never as cancelled, and its leftovers are cleaned",
        True,
    ),
    Scenario(
        "silent_builder",
        stop_scenarios.sc_silent_builder,
        "a builder silent past the grace is terminated and recorded as forced, never as cooperative",
        True,
    ),
    Scenario(
        "disk_full",
        artifact_scenarios.sc_disk_full,
        "a disk that fills while the engine is written fails the build and keeps the previous engine byte-for-byte",
        True,
    ),
    Scenario(
        "readonly_output",
        artifact_scenarios.sc_readonly_output,
        "an unwritable output folder fails the build cleanly and keeps the previous engine",
    ),
    Scenario(
        "corrupted_cache",
        artifact_scenarios.sc_corrupted_cache,
        "a truncated/flipped timing cache is caught by its digest, quarantined, and the build runs cold",
        True,
    ),
    Scenario(
        "concurrent_cache",
        artifact_scenarios.sc_concurrent_cache,
        "two processes saving the same cache at once leave a file that matches its sidecar digest and lose no merged "
        "record",
    ),
    Scenario(
        "server_killed",
        stop_scenarios.sc_server_killed,
        "a language server killed mid-build: a new server finds the orphan, stops and cleans it, records outcome "
        "killed and tells the user",
    ),
)
BY_NAME = {s.name: s for s in SCENARIOS}
GROUPS = {"fast": [s.name for s in SCENARIOS if s.fast], "all": [s.name for s in SCENARIOS]}


def select(spec: str | None) -> list[Scenario]:
    """`fast`, `all`, or a comma-separated list of names (groups may be mixed in). ValueError on an unknown name."""
    names: list[str] = []
    for part in (spec or "fast").split(","):
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
