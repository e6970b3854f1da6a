"""How a build's stop escalates, in the supervisor process (on the event loop of the Supervisor that owns it): the
cancel goes to the worker as a control line; past the builder's grace (`cancel_grace_s`), or at once when the user
forces the stop (a second Ctrl-C), the worker's process group gets SIGTERM, then SIGKILL — and whose stop it was
decides the outcome (`forced` blames the builder; the user's forced stop stays `cancelled`).

    stops = StopEscalation()
    build.attach(loop, force=lambda: stops.force_now(build))          # the user's forced stop
    build.token.on_request(lambda source: loop.call_soon_threadsafe(stops.on_cancel, build))
    stops.worker_started(build)                                        # a stop asked before the worker existed
    outcome = stops.forced_outcome(build)                              # a build whose token was forced
    stops.forget(build.id)                                             # the build is over
"""

from __future__ import annotations

import asyncio
import signal
from typing import Any

from trtls import fs
from trtls.builds.supervisor.build import Build
from trtls.core.build_state import Forced
from trtls.core.events import CancelControl
from trtls.core.vocabulary import BuildOutcome

KILL_AFTER_TERM_S = 0.1  # SIGTERM → SIGKILL; the forced stop is done within grace + ~200 ms


def signal_group(proc: Any, sig: int) -> bool:
    """Signal a worker's process group: a local one (our own child, not yet reaped) through the door, a remote one
    through its node (RemoteProcess)."""
    if hasattr(proc, "signal_group"):
        proc.signal_group(sig)
        return True
    return fs.signal_child(proc, sig, group=True)


class StopEscalation:
    """The stops of one Supervisor's builds: what was asked before a worker existed, and which the user forced."""

    def __init__(self) -> None:
        self.force_on_spawn: dict[str, bool] = {}  # forced before their worker existed → by the user (escalate then)
        self.user_forced: set[str] = set()  # stopped at once because the user asked (a second Ctrl-C), not the grace

    def on_cancel(self, build: Build) -> None:
        """The build's token was set (any source, brought to the loop thread): tell the worker, then wait its grace."""
        self.send_control(build)
        if build.running:
            asyncio.ensure_future(self.escalate(build.grace_s, build))

    def send_control(self, build: Build) -> None:
        proc = build.worker
        if proc is None or proc.stdin is None or proc.stdin.is_closing():
            return
        msg = CancelControl(source=build.token.source, t_request_ns=build.token.t_request_ns)
        try:
            proc.stdin.write((msg.model_dump_json() + "\n").encode())
        except (BrokenPipeError, ConnectionResetError):
            pass

    def force_now(self, build: Build) -> None:
        """`Build.force()`: the user asked to stop at once (a second Ctrl-C), so the grace is skipped. The stop is
        theirs, not the builder's failure to honour a cancel: the outcome stays `cancelled` (issue 27, item 21)."""
        if not build.token.is_set:
            build.cancel("api")
        asyncio.ensure_future(self.escalate(0.0, build, by_user=True))

    def worker_started(self, build: Build) -> None:
        """The worker now exists: a cancel that came before it (or, sent ahead, before its commit) reaches it, and one
        forced before it existed escalates at once (its grace is already over)."""
        if not build.token.is_set:
            return
        self.send_control(build)
        if build.id in self.force_on_spawn:
            asyncio.ensure_future(self.escalate(0.0, build, by_user=self.force_on_spawn[build.id]))

    async def escalate(self, grace_s: float, build: Build, by_user: bool = False) -> None:
        await asyncio.sleep(grace_s)
        proc = build.worker
        if proc is None and build.running:  # not spawned yet: escalate as soon as it is
            self.force_on_spawn[build.id] = self.force_on_spawn.get(build.id, False) or by_user
            return
        if proc is None or proc.returncode is not None or build.builder_returned_ns is not None:
            return  # the builder returned in time: the stop was cooperative
        if build.token.forced:
            return  # already being terminated; whoever started it decided why
        if by_user:
            self.user_forced.add(build.id)
            build.fold(
                Forced(
                    f"the user forced the stop (asked again after the cancel from {build.token.source}): the builder's "
                    f"grace of {build.grace_s:g} s was not waited for; SIGTERM, then SIGKILL"
                )
            )
        else:
            build.fold(Forced(f"the builder did not return within {grace_s:g} s of the cancel: SIGTERM, then SIGKILL"))
        for sig, wait in ((signal.SIGTERM, KILL_AFTER_TERM_S), (signal.SIGKILL, None)):
            if not signal_group(proc, sig):
                return
            if wait is None:
                return
            try:
                await asyncio.wait_for(asyncio.shield(proc.wait()), wait)
                return
            except TimeoutError:
                continue

    def forced_outcome(self, build: Build) -> BuildOutcome:
        """A forced stop's outcome: the user's forced stop is their cancel; `forced` blames the builder."""
        return "cancelled" if build.id in self.user_forced else "forced"

    def forget(self, build_id: str) -> None:
        """The build is over."""
        self.force_on_spawn.pop(build_id, None)
        self.user_forced.discard(build_id)
