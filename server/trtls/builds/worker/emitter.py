"""The worker's event output: `EventWriter` writes `trtls.events/1` JSON lines on stdout (one lock, one flush per
line); `Emitter` is the thread that turns the progress monitor's queue into those lines, coalescing steps (the latest
step per phase at most every 50 ms; phase starts and finishes are never dropped). Standard library and the door only:
the worker pays for every import before TensorRT is even loaded."""

from __future__ import annotations

import json
import os
import threading
import time
from queue import Empty, SimpleQueue
from typing import Any

from trtls.core.protocol import PROTOCOL_VERSION
from trtls.fs.descriptor import file_of

STEP_INTERVAL_NS = 50_000_000
Event = tuple[str, "int | None", dict[str, Any]]  # (type, t_ns, fields): what `EventWriter.release` writes first


class EventWriter:
    """JSON lines on a private copy of stdout; fd 1 itself is pointed at stderr so that nothing TensorRT
    or a library prints can corrupt the event stream.

    `hold` keeps the lines emitted from then on (each stamped when it was emitted) until `release`, which writes the
    events it is given first and the held lines after them: the worker starts TensorRT's builder before its
    environment record can be made (the CUDA driver's first answer: builds/worker/environment.py), and the stream
    still says `environment` and `build_started` before any phase."""

    def __init__(self) -> None:
        out_fd = os.dup(1)
        os.dup2(2, 1)
        self.out = file_of(out_fd, "w", buffering=1 << 16)
        self.lock = threading.Lock()
        self.held: list[str] | None = None

    def emit(self, event_type: str, t_ns: int | None = None, **fields: Any) -> None:
        line = self._line(event_type, t_ns, fields)
        with self.lock:
            if self.held is not None:
                self.held.append(line)
                return
            self.out.write(line)
            self.out.flush()

    def hold(self) -> None:
        with self.lock:
            if self.held is None:
                self.held = []

    def release(self, *first: Event) -> None:
        """Write `first` (type, t_ns, fields), then every line held since `hold`, and stop holding; with nothing held,
        `first` is written as `emit` would."""
        lines = [self._line(event_type, t_ns, fields) for event_type, t_ns, fields in first]
        with self.lock:
            held, self.held = self.held or [], None
            self.out.write("".join(lines + held))
            self.out.flush()

    @staticmethod
    def _line(event_type: str, t_ns: int | None, fields: dict[str, Any]) -> str:
        record = {"v": PROTOCOL_VERSION, "type": event_type, "t_ns": t_ns or time.monotonic_ns(), **fields}
        return json.dumps(record, default=str) + "\n"


class Emitter(threading.Thread):
    """Drains the monitor's queue: at most one step event per phase every 50 ms (the latest step wins);
    phase starts and finishes are never dropped, and a finish carries the phase's last step."""

    def __init__(self, queue: SimpleQueue, writer: EventWriter):
        super().__init__(name="trtls-emitter", daemon=True)
        self.queue = queue
        self.writer = writer
        self.pending: dict[str, tuple[int, int]] = {}  # phase id → (t_ns, step) not yet sent
        self.last_sent: dict[str, int] = {}  # phase id → when its last step event was written
        self.last_step: dict[str, int] = {}

    def flush_due(self) -> None:
        now = time.monotonic_ns()
        for phase_id in [p for p in self.pending if now - self.last_sent.get(p, 0) >= STEP_INTERVAL_NS]:
            t, step = self.pending.pop(phase_id)
            self.writer.emit("step", t, phase_id=phase_id, step=step)
            self.last_sent[phase_id] = now

    def handle(self, rec: tuple) -> None:
        kind = rec[0]
        if kind == "step":
            _, t, phase_id, step = rec
            if phase_id is None:
                return
            self.last_step[phase_id] = step
            self.pending[phase_id] = (t, step)
            self.flush_due()
        elif kind == "phase_start":
            _, t, tid, phase_id, parent_id, name, num_steps = rec
            self.writer.emit(
                "phase_start", t, phase_id=phase_id, parent_id=parent_id, name=name, num_steps=num_steps, tid=tid
            )
        elif kind == "phase_finish":
            _, t, phase_id, status = rec
            if phase_id is not None:
                self.pending.pop(phase_id, None)  # the finish carries the last step instead
                self.writer.emit("phase_finish", t, phase_id=phase_id, status=status, step=self.last_step.get(phase_id))

    def run(self) -> None:
        while True:
            try:
                rec = self.queue.get(timeout=STEP_INTERVAL_NS / 1e9)
            except Empty:
                self.flush_due()
                continue
            if rec[0] == "stop":  # a marker, not a flag: waking on it costs nothing, a timeout costs 50 ms
                return
            self.handle(rec)

    def drain(self) -> None:
        """Called once the builder has returned: send everything still queued, in order."""
        self.queue.put(("stop",))
        self.join(timeout=1.0)
        while True:
            try:
                self.handle(self.queue.get_nowait())
            except Empty:
                break
        for phase_id, (t, step) in self.pending.items():
            self.writer.emit("step", t, phase_id=phase_id, step=step)
        self.pending.clear()
