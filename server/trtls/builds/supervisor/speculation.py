"""The job before the check: an unchanged build starts TensorRT while its recipe is still being checked.

The fixed cost of `trtls build` is the parent's serial work before the worker gets its job — pydantic, the recipe and
build-config models, the ONNX checks, the store's key and lookup, the output's lock and probe, `running.json`: ~0.4 s
of CPU here, more on a host where each import costs more — while the worker, started first, has TensorRT imported and
waits (docs/performance.md, "Fixed cost of trtls build"). When the fast path's memo holds (builds/avoidance/reuse.py:
the recipe's bytes, every file the key reads, the builder, the device and the modules that turn a recipe into a job
are all those of the last build) and the store lacks the key, the job of this build is the last build's job with a
new id. It is sent at once with `hold_commit`: the worker builds but writes nothing until the supervisor's `commit`
line (core.events.CommitControl), which the supervisor sends where it would have sent the job, and only when the job
it built from the checked recipe is the one sent (`same_job`). Everything else — another job, a refusal, a store hit
(another process published the key meanwhile), a cancel, a supervisor that died — discards the build like a cancel.

Only what writes nothing before its commit is sent ahead: no precision step (its converted model is cached), no
plugin libraries (loaded before the recipe's paths are judged), no faults. A timing cache goes: a worker holding its
commit reads a cache file (which may quarantine it) only after the commit, and writes one back only then. Standard
library only: it runs before the recipe models are imported.
"""

from __future__ import annotations

import json
import os
import selectors
import time
from dataclasses import dataclass, field
from typing import Any

from trtls.core.vocabulary import BUILDER_PREFERENCES

HOLD = "hold_commit"
NOTE = (
    "TensorRT started from the last build's job while the recipe was checked (the inputs unchanged, the recipe too or "
    "edited only outside this engine's table, and a build certain: the store lacked the engine, or --no-store); no "
    "engine could be written before the checked job matched it"
)
CHECKED_NOTE = (
    "TensorRT started from this build's checked job as soon as the recipe was checked, while the store was looked up "
    "and the supervisor locked and probed the output; no engine could be written before the supervisor's commit, "
    "sent only once the store missed"
)
# A start's runnable threads: this process (the check), the worker's main thread (its modules, then TensorRT's import)
# and its library loader (builds/worker/prefetch.py). With fewer CPUs than that they take turns.
START_THREADS = 3


def _start_bound() -> float:
    """How long the check waits for the worker's start (`let_it_start`): ~3× a warm worker's spawn → builder here
    (~0.1 s); a cold start is slow on its disk, not its CPU, and the check then goes on. A test sets a longer one
    (`TRTLS_TEST_START_BOUND_S`), so a loaded machine cannot end the wait before the worker's line."""
    try:
        value = float(os.environ.get("TRTLS_TEST_START_BOUND_S", ""))
    except ValueError:
        return 0.3
    return value if 0 < value <= 600 else 0.3


START_BOUND_S = _start_bound()


def _plain(job: dict[str, Any]) -> Any:
    """The job as JSON reads it back (tuples → lists, paths → strings): what the worker receives."""
    return json.loads(json.dumps(job, default=str))


def may_go_ahead(job: dict[str, Any]) -> bool:
    """A job whose worker writes nothing before its commit (module doc), for the built-in worker."""
    plugins = job.get("plugins") or {}
    return (
        job.get("type") == "job"
        and job.get("builder_module") in BUILDER_PREFERENCES
        and not (job.get("precision") or {}).get("convert")
        and not plugins.get("libraries")
        and not plugins.get("serialize")
        and not job.get("faults")
        and not job.get("no_monitor")
    )


def job_to_remember(job: dict[str, Any] | None) -> dict[str, Any] | None:
    """What the fast path's memo keeps of a build's job for the next unchanged build: the job without its id, or None
    when such a job is never sent ahead."""
    if job is None or not may_go_ahead(job):
        return None
    kept = _plain(job)
    kept.pop("build_id", None)
    kept.pop(HOLD, None)
    return dict(kept)


@dataclass(frozen=True)
class JobAhead:
    """A job sent to a worker ahead of the supervisor, and when: the build started then (its evidence's clock).
    `note`: what the evidence says of it — the last build's job sent before the check (`NOTE`), or this build's own
    checked job sent as soon as the recipe was checked (`CHECKED_NOTE`, `send_checked`)."""

    job: dict[str, Any]
    t_sent_ns: int = field(default_factory=time.monotonic_ns)
    sent_at: float = field(default_factory=time.time)
    note: str = NOTE

    @property
    def build_id(self) -> str:
        return str(self.job["build_id"])


def job_ahead(remembered: Any, engine: str, build_id: str) -> JobAhead | None:
    """The job to send ahead of the check: the remembered job with this build's id, holding its commit; None when
    the memo kept none (or one of another engine, or one that may not go ahead)."""
    if not isinstance(remembered, dict) or remembered.get("engine") != engine or not may_go_ahead(remembered):
        return None
    return JobAhead({**remembered, "build_id": build_id, HOLD: True})


def same_job(sent: dict[str, Any], job: dict[str, Any]) -> bool:
    """Whether the job built from the checked recipe is the job sent ahead (its hold aside)."""
    a, b = _plain(sent), _plain(job)
    a.pop(HOLD, None)
    b.pop(HOLD, None)
    return bool(a == b)


def send_ahead(worker: Any, remembered: Any, engine: str, build_id: str) -> JobAhead | None:
    """Send the remembered job to an early worker (still importing TensorRT: it reads the line when ready); the job
    sent, or None when none may go."""
    return _send(worker, job_ahead(remembered, engine, build_id))


def send_checked(worker: Any, job: dict[str, Any]) -> JobAhead | None:
    """This build's own job, built from the checked recipe, to the early worker that was sent nothing (the recipe
    changed since the engine's last build here, so no job could go before the check) as soon as the job exists
    (app.request): the worker builds while the store is looked up (its key hashes the inputs), the supervisor is
    imported and made, locks and probes the output and writes running.json — and, in the terminal, while the command
    line's modules and asyncio are imported (cli/store_lookup.py `check_ahead`) — and writes nothing before its
    `commit`, which the supervisor sends where it would have sent the job, once the store missed. A hit, a refusal or
    a wait for another process's build of the key discards it. None when such a job may not go ahead
    (`may_go_ahead`)."""
    if not may_go_ahead(job):
        return None
    return _send(worker, JobAhead({**job, HOLD: True}, note=CHECKED_NOTE))


def _send(worker: Any, ahead: JobAhead | None) -> JobAhead | None:
    if ahead is None or worker is None or worker.stdin is None or worker.returncode is not None:
        return None
    worker.stdin.write((json.dumps(ahead.job) + "\n").encode())
    flush = getattr(worker.stdin, "flush", None)  # a subprocess.Popen's buffered pipe (worker_launch.start_now)
    if flush is not None:
        flush()
    return ahead


def let_it_start(worker: Any, bound_s: float = START_BOUND_S) -> str:
    """After a job went ahead: where the CPUs this process may keep busy (core.cgroups) are fewer than a start's
    runnable threads (`START_THREADS`), wait until the worker sends its first line (its builder has started: the
    environment record or the build's first event), ends, or `bound_s` passes, before this process imports and checks
    the recipe.
    The check's answer is wanted only at the commit, at the build's end; run beside the worker's start it took CPU from
    the builder's critical path (2 CPUs, 2026-12-07, `bench_cli_fixed_cost.py --baseline`, 13–15 pairs: `demo`
    --no-store 1.121 → 1.099 ×, fresh 1.174 → 1.128, edited 1.185 → 1.160), and run beside the builder — one thread:
    the other CPU is free — it costs it next to nothing. Nothing is read: the supervisor that adopts the worker reads
    every line. Where CPUs are not scarce it returns at once. Returns what ended the wait: `not_scarce`, `started`
    (a line, or the worker's end), `bound`, or `unwatched` (no pipe to watch: the check goes on)."""
    if _cpus() >= START_THREADS:
        return "not_scarce"
    out = getattr(worker, "stdout", None)
    if out is None:
        return "unwatched"
    try:
        with selectors.DefaultSelector() as watch:  # not select(), which refuses a descriptor past 1023
            watch.register(out, selectors.EVENT_READ)
            return "started" if watch.select(bound_s) else "bound"
    except (OSError, ValueError):  # a pipe already closed
        return "unwatched"


def _cpus() -> int:
    """The CPUs this process may keep busy: its affinity and its cgroup's CPU quota (core.cgroups)."""
    from trtls.core.cgroups import usable_cpus

    return usable_cpus()
