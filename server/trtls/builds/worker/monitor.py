"""The IProgressMonitor callbacks: stamp, enqueue, read the shared cancel state. Nothing else.

They run on TensorRT's builder threads and re-take the GIL each time, so every extra microsecond is
paid hundreds of times per build (a heavy monitor measurably slowed builds: pytorch/TensorRT#3215).
They never raise: an exception in `step_complete` cancels the build, and one in the other two is
swallowed by TensorRT, so either way it would be a silent misbehaviour.

The class is created at run time from the module the adapter loaded (`tensorrt` or `tensorrt_rtx`),
because the base class lives there and this module must not import TensorRT.
"""

from __future__ import annotations

import threading
import time
from queue import SimpleQueue
from typing import Any

from trtls.core.cancel import CancelToken
from trtls.core.open_phases import OpenPhases

# A phase whose name starts so is the builder timing tactics (TensorRT-RTX 1.7.1: "Timing tactics", inside "Computing
# profile costs"). Every layer's runners are chosen before it (tacticSupply.cpp, getSupportedFormats): a network
# whose layer has none fails before the first timing starts (capability.trial_build, capability.build_trial).
TIMING_PHASE = "Timing"

# Records put on the queue, as plain tuples (cheapest to build on a builder thread):
#   ("phase_start", t_ns, tid, phase_id, parent_id, name, num_steps)
#   ("step", t_ns, phase_id, step)
#   ("phase_finish", t_ns, phase_id, status)


def make_monitor_class(base: Any) -> type:
    """`base` is the builder module's IProgressMonitor (a pybind11 class, untyped)."""

    class ProgressMonitor(base):
        def __init__(
            self, queue: SimpleQueue, cancel: CancelToken, stall: dict[str, Any] | None = None, first_root: int = 0
        ):
            base.__init__(self)
            self.queue = queue
            self.cancel = cancel
            self.names = OpenPhases(first_root)
            self.lock = threading.Lock()  # phase starts/finishes may come from several builder threads
            self.returned_false = False  # after the first False, every phase that finishes was cancelled
            self.cancel_seen_ns: int | None = None
            self.phases_started = 0
            self.timed: str | None = None  # the first timing phase the build started (capability.build_trial)
            # Fault injection for the acceptance tests only (never set from a recipe): block inside one
            # callback to reproduce a builder that is silent past the cancel grace.
            self.stall = stall

        def phase_start(self, phase_name: str, parent_phase: str | None, num_steps: int) -> None:
            try:
                t = time.monotonic_ns()
                with self.lock:
                    phase_id, parent_id = self.names.start(phase_name, parent_phase)
                    self.phases_started += 1
                    index = self.phases_started
                    if self.timed is None and phase_name.startswith(TIMING_PHASE):
                        self.timed = phase_name
                self.queue.put(("phase_start", t, threading.get_ident(), phase_id, parent_id, phase_name, num_steps))
                if self.stall is not None and index == self.stall.get("at_phase", 1):
                    if self.stall.get("until_cancel"):  # tests (fs.hold.held_phase): a stop that lands mid-build
                        end = time.monotonic() + self.stall["seconds"]
                        while not self.cancel.is_set and time.monotonic() < end:
                            time.sleep(0.01)
                    else:
                        time.sleep(self.stall["seconds"])
            except BaseException:
                pass

        def step_complete(self, phase_name: str, step: int) -> bool:
            try:
                t = time.monotonic_ns()
                self.queue.put(("step", t, self.names.id_of(phase_name), step))
                if self.cancel.is_set:
                    if not self.returned_false:
                        self.cancel_seen_ns, self.returned_false = t, True
                    return False
                return True
            except BaseException:
                return not self.cancel.is_set

        def phase_finish(self, phase_name: str) -> None:
            try:
                t = time.monotonic_ns()
                with self.lock:
                    phase_id = self.names.finish(phase_name)
                self.queue.put(("phase_finish", t, phase_id, "cancelled" if self.returned_false else "done"))
            except BaseException:
                pass

    return ProgressMonitor
