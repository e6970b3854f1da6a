"""The supervisor's hold on one build's output: the lock (one writer per output), what the output was when the build
took it, and what is on disk when the build ends.

    guard = OutputGuard.for_build(build, owner)
    if not await guard.take(build, wait=True): ...        # waits (visibly) for another build of the same output
    ...                                                   # the build runs; nobody else renames over the output
    await guard.verify_written(build)                     # the engine's sha re-read from disk after the rename
    guard.release()

Because the lock is held from before the previous engine is hashed until after the evidence is written, a build that
did not write the output can compare it with what it hashed and be right by construction: no other trtls build
could have replaced it meanwhile.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import Any

from trtls.builds.artifacts import sha256_file
from trtls.builds.supervisor.build import Build
from trtls.builds.supervisor.job import state_dir
from trtls.builds.supervisor.output_lock import OutputLock, OutputLockError, acquire, describe_holder, lock_path
from trtls.builds.supervisor.running_record import output_state
from trtls.core.build_state import EngineCheck, EngineVerified, Erred, StatusSaid
from trtls.core.events import parse_event


def locks_dir_for(build: Build) -> Any:
    return state_dir(build.recipe_path) / "locks"


@dataclass
class OutputGuard:
    lock: OutputLock
    owner: dict[str, Any]
    before: dict[str, Any] = field(default_factory=dict)
    waited: list[dict[str, Any]] = field(default_factory=list)
    t_wait_start: float | None = None
    refused: str | None = None

    @classmethod
    def for_build(cls, build: Build, owner: dict[str, Any]) -> OutputGuard:
        return cls(OutputLock(lock_path(locks_dir_for(build), build.output), build.output), owner)

    async def take(self, build: Build, *, wait: bool) -> bool:
        """Hold the output's lock. While another build holds it, the build's status and a WARNING line say which
        build it waits for. False (with `refused` or `build.error` set) when not taken: `wait` is False and the
        output is busy, the build was cancelled while waiting, or the lock cannot be opened."""
        holder = {"buildId": build.id, "pid": self.owner.get("pid"), "owner": self.owner, "engine": build.engine}

        def on_wait(current: dict[str, Any]) -> None:
            self.t_wait_start = self.t_wait_start or time.time()
            self.waited.append(current)
            if not wait:
                return
            text = f"waiting for {describe_holder(current)} of the same output {build.output}"
            build.fold(StatusSaid(text))
            _announce(build, "WARNING", f"trtls: {text}")

        try:
            taken = await acquire(self.lock, holder, wait=wait, on_wait=on_wait, stop=lambda: build.token.is_set)
        except OutputLockError as exc:
            build.fold(Erred(f"TRT411 {exc.strerror or exc}; nothing was built"))
            return False
        if taken:
            build.fold(StatusSaid("starting"))
            self.before = output_state(build.output)
            return True
        if not wait:
            self.refused = (
                f"TRT410 the output {build.output} is being built by {describe_holder(self.waited[-1])}; "
                "this build did not start (--no-wait). Wait for it, or build without --no-wait to queue behind it"
            )
            build.fold(Erred(self.refused))
        return False

    async def verify_written(self, build: Build) -> None:
        """Replace the worker's sha of the engine it wrote by the sha of the file on disk now (re-read while the lock
        is still held), keeping the worker's as `reportedSha256`; a difference is said in the notes."""
        checks, notes = [], []
        for index, entry in enumerate(build.artifacts):
            if entry.kind != "engine" or entry.action != "written":
                continue
            reported = entry.sha256
            if build.remote is not None and not build.output.is_file():
                checks.append(EngineCheck(index, reported, None, None, "not re-read: a remote node wrote it"))
                continue
            try:
                on_disk = await asyncio.get_running_loop().run_in_executor(None, sha256_file, build.output)
            except OSError as exc:
                checks.append(EngineCheck(index, reported, None, False, f"cannot re-read: {exc}"))
                notes.append(f"the engine could not be re-read after the rename: {exc}")
                continue
            how = "re-read from disk after the rename, with the output locked"
            checks.append(EngineCheck(index, reported, on_disk, on_disk == reported, how))
            if on_disk != reported:
                notes.append(
                    f"the engine on disk (sha256 {on_disk[:16]}…) is not the one the worker wrote "
                    f"({str(reported)[:16]}…): something outside trtls replaced it"
                )
        build.fold(EngineVerified(tuple(checks), tuple(notes)))

    def record(self) -> dict[str, Any]:
        """The summary's `outputLock`: which lock, which builds this one waited for, since when."""
        return {
            "lockFile": str(self.lock.path),
            "acquiredAt": self.lock.acquired_at,
            "waitedFor": [w.get("buildId") for w in self.waited],
            "waitStartedAt": self.t_wait_start,
        }

    def release(self) -> None:
        self.lock.release()


def _announce(build: Build, severity: str, msg: str) -> None:
    """A line every face shows (terminal, --json, the editor's log): a `log` event from the supervisor itself."""
    ev = parse_event(json.dumps({"type": "log", "t_ns": time.monotonic_ns(), "severity": severity, "msg": msg}))
    build.deliver(ev)
