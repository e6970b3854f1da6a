"""The progress monitor on the real IProgressMonitor base class: stamp, enqueue, read the cancel state, never raise."""

from __future__ import annotations

import threading
from queue import SimpleQueue

import pytest

from trtls.builds.worker import adapter
from trtls.builds.worker.monitor import make_monitor_class
from trtls.core.cancel import CancelToken


@pytest.fixture(scope="module")
def monitor_cls() -> type:
    return make_monitor_class(adapter.make_progress_monitor_base(adapter.load_builder_module("tensorrt_rtx")))


def test_records_and_ids(monitor_cls: type) -> None:
    q: SimpleQueue = SimpleQueue()
    m = monitor_cls(q, CancelToken())
    m.phase_start("Building engine", None, 3)
    m.phase_start("Timing", "Building engine", 2)
    assert m.step_complete("Timing", 0) is True
    m.phase_finish("Timing")
    recs = [q.get_nowait() for _ in range(q.qsize())]
    assert [r[0] for r in recs] == ["phase_start", "phase_start", "step", "phase_finish"]
    assert recs[1][3:5] == ("0.0", "0") and recs[2][2:] == ("0.0", 0) and recs[3][2:] == ("0.0", "done")
    assert all(isinstance(r[1], int) for r in recs), "every record is stamped with monotonic ns"


def test_cancel_returns_false_and_marks_unwinding_phases(monitor_cls: type) -> None:
    q: SimpleQueue = SimpleQueue()
    token = CancelToken()
    m = monitor_cls(q, token)
    m.phase_start("Building engine", None, 3)
    token.request("ctrl_c")  # e.g. from a signal handler: the same shared state, never a callback-local flag
    assert m.step_complete("Building engine", 0) is False
    assert m.step_complete("Building engine", 1) is False
    m.phase_finish("Building engine")
    recs = [q.get_nowait() for _ in range(q.qsize())]
    assert recs[-1][0] == "phase_finish" and recs[-1][3] == "cancelled"
    assert m.cancel_seen_ns == recs[1][1], "the first callback that saw the cancel is recorded"


class ExplodingQueue:
    def put(self, item: object) -> None:
        raise RuntimeError("queue broken")


def test_callbacks_never_raise(monitor_cls: type) -> None:
    token = CancelToken()
    m = monitor_cls(ExplodingQueue(), token)
    m.phase_start("x", None, 1)
    assert m.step_complete("x", 0) is True  # an exception here would cancel the build
    token.request("api")
    assert m.step_complete("x", 0) is False
    m.phase_finish("x")


def test_thread_safe_phase_ids(monitor_cls: type) -> None:
    q: SimpleQueue = SimpleQueue()
    m = monitor_cls(q, CancelToken())
    m.phase_start("root", None, 1)

    def worker(n: int) -> None:
        for i in range(200):
            name = f"p{n}-{i}"
            m.phase_start(name, "root", 1)
            m.step_complete(name, 0)
            m.phase_finish(name)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    starts = [r for r in (q.get_nowait() for _ in range(q.qsize())) if r[0] == "phase_start" and r[4] == "0"]
    ids = [r[3] for r in starts]
    assert len(ids) == 800 and len(set(ids)) == 800, "concurrent starts never share an id"
