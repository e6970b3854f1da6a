"""Where a store's upload of a build's engine to its remote store stands, read from any thread while the publish runs
on its own (the build's end: builds/avoidance/lookup.attach; a farm node's: builds/farm/node_store.py).

    not started ──► sending ──► done (sent | stopped | not sent: why)
         └────────► skipped: why (the key did not match what was built, the local publish failed, the remote could not
                                  be reached a moment ago, the store held these bytes already, a farm node sent it)

`Store.upload` holds it (store/publishing.py): the store's publish and `remote.push_entry` move it on, and
`cut_by_a_stop` reads what a stop of a build that has ended still cuts there — an upload that is sending, or one not
started yet by a store that would send it; never one the store skips or has done (a stop's line named an upload that
was never going to happen)."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from trtls.store.publishing import PublishingFolder

UploadPhase = Literal["not_started", "sending", "done", "skipped"]


@dataclass(frozen=True)
class UploadNow:
    """One reading of the upload: its phase, and for `done` how it ended, for `skipped` why."""

    phase: UploadPhase
    reason: str | None = None
    stopped_by: str | None = None  # `done` because a stop cut it: the stop's source (`ide_stop`, `ctrl_c`, …)

    def __str__(self) -> str:
        said = self.phase.replace("_", " ")
        return f"{said}: {self.reason}" if self.reason else said

    def record(self) -> dict[str, str | None]:
        """The evidence's `store.upload`: how the upload ended (`sent`, `stopped (ide_stop): no record was sent`, `not
        sent: …`) or why it was skipped, and `stoppedBy` when a stop cut it (core/build_view: the outcome says so)."""
        return {"phase": self.phase, "reason": self.reason, "stoppedBy": self.stopped_by}


class UploadState:
    """The upload's phase, moved on by the publishing thread and read by any other (a stop's handler): each reading
    is one whole `UploadNow`. An upload that is over (done or skipped) stays over."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._now = UploadNow("not_started")

    def now(self) -> UploadNow:
        with self._lock:
            return self._now

    def sending(self) -> None:
        self._move(UploadNow("sending"))

    def done(self, how: str) -> None:
        self._move(UploadNow("done", how))

    def stopped(self, source: str | None) -> None:
        """A stop cut the upload (`source`: its source, if it named one): no record was sent."""
        how = f" ({source})" if source else ""
        self._move(UploadNow("done", f"stopped{how}: no record was sent", source or "a stop"))

    def skipped(self, why: str) -> None:
        self._move(UploadNow("skipped", why))

    def _move(self, to: UploadNow) -> None:
        with self._lock:
            if self._now.phase not in ("done", "skipped"):
                self._now = to


def cut_by_a_stop(store: PublishingFolder) -> str | None:
    """The remote store (its URL as shown) whose upload of the build's engine a stop of the build would cut now: the
    upload is sending, or not started yet by a store that would send it (read-write, writable here, a usable remote
    that was not found unreachable a moment ago); None when a stop cuts nothing there — no remote, the upload skipped
    or done. Read from any thread."""
    from trtls.store.remote_http import down, remembered, shown, usable

    url = usable(store.remote_url)
    if url is None or store.mode != "read_write":
        return None
    now = store.upload.now()
    if now.phase == "sending":
        return shown(url)
    if now.phase == "not_started" and store.unwritable is None and not remembered(down, url):
        return shown(url)
    return None
