"""One cancel state per build, shared by every source that can stop it.

IDE Stop, Ctrl-C, a CI timeout, service shutdown, an API call and asyncio cancellation all call
`request(source)` on the same token. The first request wins and is the build's cancelSource; later
ones are kept for the record. The progress monitor only ever reads `is_set` (one attribute read,
cheap on a builder thread), which avoids the bug in NVIDIA's sample where a Ctrl-C caught in
`phase_start` set a local variable and was lost.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from trtls.core.protocol import CANCEL_SOURCES


class CancelToken:
    """A plain class, not a dataclass (the worker imports it before TensorRT, and `dataclasses` would bring `inspect`,
    `ast` and `dis`): the same constructor, fields and repr; compared by identity, as the dataclass's unique lock made
    it."""

    def __init__(
        self,
        source: str | None = None,
        t_request_ns: int | None = None,
        t_ack_ns: int | None = None,  # builder returned after the request
        t_cleanup_ns: int | None = None,  # partial files removed or quarantined
        forced: bool = False,  # cooperative cancel did not finish within the grace: SIGTERM/SIGKILL
        after_complete: bool = False,  # the request came while the finished engine was being committed
        later_requests: list[tuple[str, int]] | None = None,
    ) -> None:
        self.source = source
        self.t_request_ns = t_request_ns
        self.t_ack_ns = t_ack_ns
        self.t_cleanup_ns = t_cleanup_ns
        self.forced = forced
        self.after_complete = after_complete
        self.later_requests: list[tuple[str, int]] = [] if later_requests is None else later_requests
        self._lock = threading.Lock()
        self._listeners: list[Callable[[str], object]] = []

    def __repr__(self) -> str:
        fields = ("source", "t_request_ns", "t_ack_ns", "t_cleanup_ns", "forced", "after_complete", "later_requests")
        return f"CancelToken({', '.join(f'{k}={getattr(self, k)!r}' for k in fields)})"

    @property
    def is_set(self) -> bool:
        return self.source is not None

    def request(self, source: str, t_ns: int | None = None) -> bool:
        """Ask the build to stop. Thread-safe; returns True for the request that decided the source."""
        if source not in CANCEL_SOURCES:
            raise ValueError(f"unknown cancel source {source!r}; expected one of {', '.join(CANCEL_SOURCES)}")
        t_ns = time.monotonic_ns() if t_ns is None else t_ns
        with self._lock:
            if self.source is not None:
                self.later_requests.append((source, t_ns))
                return False
            self.t_request_ns = t_ns
            self.source = source
            listeners = list(self._listeners)
        for listener in listeners:
            listener(source)
        return True

    def on_request(self, listener: Callable[[str], object]) -> None:
        """Call `listener(source)` once a request arrives (at once if one already has)."""
        with self._lock:
            fire = self.source
            if fire is None:
                self._listeners.append(listener)
        if fire is not None:
            listener(fire)

    def off_request(self, listener: Callable[[str], object]) -> None:
        """Stop calling `listener` (its work is over): a token that lives long — the editor's lookups, a matrix —
        must not keep a listener per request it served."""
        with self._lock:
            if listener in self._listeners:
                self._listeners.remove(listener)

    def latencies_ms(self) -> dict[str, float | None]:
        def ms(a: int | None, b: int | None) -> float | None:
            return None if a is None or b is None else round((b - a) / 1e6, 3)

        return {
            "cancelLatencyMs": ms(self.t_request_ns, self.t_ack_ns),
            "cleanupLatencyMs": ms(self.t_ack_ns, self.t_cleanup_ns),
        }
