"""The worker's environment record — what builds the engine (builds.worker.adapter.environment_record) — made once and
sent as the `environment` event ahead of every other event of the build, stamped when TensorRT was loaded.

Its device half is the CUDA driver's first answer: a cuInit, begun on a thread when the worker started
(builds/cuda.warm_driver) and ~0.2 s on a GPU host; TensorRT-RTX's builder needs no driver. On the 16-core H200 host
the record came ~130 ms after TensorRT was ready (2026-12-06 night, benchmarks/probe_cli_timeline.py), the build's
start waiting for it. So where nothing before the builder's call reads the record (a timing cache handed to TensorRT,
the precision step's phase: Worker._build decides), the worker starts the builder at once and the record is made
`beside` it, on a thread of its own: the events the build emits meanwhile are held (EventWriter.hold) and follow the
record and `build_started` (stamped with the builder's start) once the driver answers. Anything that ends the build
before the builder's call makes the record first (`get`), as a build that went on would have said it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from trtls.builds.cuda import DriverProbe
from trtls.builds.worker.emitter import Event, EventWriter
from trtls.fs.hold import test_pause

Then = Callable[[dict[str, Any]], Event]  # the event sent right after the record, made from it


class EnvironmentRecord:
    def __init__(self, writer: EventWriter, stopped: Callable[[], bool] | None = None):
        self.writer = writer
        self.stopped = stopped  # the build is stopped: the record no longer waits for the driver
        self.device_probe: DriverProbe | None = None  # the driver's probe (worker main.py starts it)
        self.builder: Any = None  # the builder module (adapter.BuilderModule): the record's other half
        self.t_ready = 0  # when TensorRT was loaded: the `environment` event's stamp
        self.made: dict[str, Any] | None = None
        self.announcer: Announcer | None = None

    def loaded(self, builder: Any) -> None:
        """TensorRT is loaded: the moment the record speaks of."""
        self.builder, self.t_ready = builder, time.monotonic_ns()

    @property
    def device_name(self) -> str | None:
        return (self.made or {}).get("device_name")

    def get(self, then: Then | None = None) -> dict[str, Any]:
        """The record, made once: it waits for the driver's probe, then goes out as the `environment` event — and
        `then(record)` right after it — ahead of every line held meanwhile."""
        if self.made is None:
            from trtls.builds.worker import adapter

            device = None  # no probe of the worker's own (a caller of Worker): the record asks the driver itself
            if (probe := self.device_probe) is not None:
                # never past the driver's bound (a cuInit that hangs is said, not waited for), nor past a stop: a
                # stopped build ends within its grace, its record saying the device was not waited for
                probe.settle(self.stopped)
                device = probe.record(stopped=self.stopped is not None and self.stopped())
            self.made = adapter.environment_record(self.builder, device)
            first: Event = ("environment", self.t_ready or None, {"environment": self.made})
            self.writer.release(first, *([then(self.made)] if then else []))
        return self.made

    def beside(self, then: Then, build_id: str, builder_returned: threading.Event) -> None:
        """Make the record, and send `then(record)` after it, on a thread of its own while the builder runs on this
        one; `joined` once the builder has returned."""
        self.announcer = Announcer(self, then, build_id, builder_returned)
        self.announcer.start()

    def joined(self) -> dict[str, Any]:
        """The record made beside the builder, once its thread is done (what it raised, raised here)."""
        if self.announcer is not None:
            self.announcer.join()
            if self.announcer.failed is not None:
                raise self.announcer.failed
        return self.get()

    def settle(self) -> None:
        """The build ended in an error of the worker's own: the record's thread done, nothing left held."""
        if self.announcer is not None:
            self.announcer.join()  # its lines first, never after the end
        self.writer.release()


class Announcer(threading.Thread):
    """`EnvironmentRecord.beside`'s thread. `failed`: what it raised, for the main thread to raise once it joins."""

    def __init__(self, record: EnvironmentRecord, then: Then, build_id: str, builder_returned: threading.Event):
        super().__init__(name="trtls-environment", daemon=True)
        self.record, self.then = record, then
        self.build_id, self.builder_returned = build_id, builder_returned
        self.failed: BaseException | None = None

    def run(self) -> None:
        try:
            # tests: a driver that answers only once the builder has returned (or the test says go)
            test_pause("device_probe", self.build_id, self.builder_returned.is_set)
            self.record.get(then=self.then)
        except BaseException as exc:
            self.failed = exc
            self.record.writer.release()  # nothing stays held: the main thread reports the failure
