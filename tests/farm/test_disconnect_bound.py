"""`cluster.disconnect` bounds `ray.shutdown()` (issue 23: a matrix's Ctrl-C must exit in a bounded margin). A fake
`ray` whose shutdown never returns on its own: disconnect still returns, says the budget ran out (on stderr and in
`last_shutdown`), ends the processes the command started (a real child process stands in for the embedded instance),
and drops Ray's exit hook that would wait for the stuck shutdown again. No Ray needed, no duration measured."""

from __future__ import annotations

import atexit
import subprocess
import sys
import threading
import types

import pytest

from trtls.builds.farm import cluster
from trtls.fs.lineage import witness


def _fake_ray(release: threading.Event, calls: list[str]) -> types.ModuleType:
    ray = types.ModuleType("ray")

    def shutdown() -> None:
        calls.append("shutdown")
        release.wait()  # stuck, as on a loaded machine, until the test lets it go

    ray.is_initialized = lambda: True  # type: ignore[attr-defined]
    ray.shutdown = shutdown  # type: ignore[attr-defined]
    ray._private = types.SimpleNamespace(worker=types.SimpleNamespace(shutdown=shutdown))  # type: ignore[attr-defined]
    return ray


@pytest.mark.parametrize("stuck", [True, False])
def test_a_stuck_ray_shutdown_is_bounded_and_what_we_started_is_ended(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], stuck: bool
) -> None:
    release = threading.Event()
    if not stuck:
        release.set()
    calls: list[str] = []
    ray = _fake_ray(release, calls)
    monkeypatch.setitem(sys.modules, "ray", ray)
    atexit.register(ray._private.worker.shutdown)  # as Ray's own module does at import
    raylet = subprocess.Popen(["sleep", "600"])  # stands in for the embedded instance's GCS and raylet
    monkeypatch.setattr(cluster, "_embedded_processes", lambda: witness([raylet.pid]))
    monkeypatch.setattr(cluster, "_connected", cluster.LOCAL)
    monkeypatch.setitem(cluster.connection, "warm", False)
    monkeypatch.setattr(cluster, "SHUTDOWN_BUDGET_S", 0.2)
    caller = threading.Thread(target=cluster.disconnect, daemon=True)
    try:
        caller.start()
        caller.join(120)  # a hang guard only: the assertion is that it returned, not how fast
        returned = not caller.is_alive()
    finally:
        release.set()
        atexit.unregister(ray._private.worker.shutdown)
        raylet.kill()
        raylet.wait()
    assert returned, "disconnect waited on ray.shutdown() without a bound"
    assert calls == ["shutdown"]
    assert cluster.last_shutdown == {"budgetS": 0.2, "withinBudget": not stuck, "ended": 1}
    assert raylet.returncode == -15, "the process it started was ended (SIGTERM) by disconnect"
    err = capsys.readouterr().err
    if stuck:
        assert "Ray's shutdown did not end within 0.2 s; ended the 1 processes of the embedded instance" in err
    else:
        assert "did not end" not in err
