"""A route build stops in every step, not only in its engine build: the checkpoint read, the export and a precision
conversion run off the event loop and check the route build's one cancel state. Before, those steps blocked the
loop: a Ctrl-C during them was seen only after the bundle had been written, and then as a Python traceback (exit -2).

Real route builds of the sample (its real exporter and checkpoint); the last test is a real `trtls route build`
process given a real SIGINT while its real ModelOpt conversion child runs."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_route_build import copy_sample, fresh_sample

from trtls.core.cancel import CancelToken
from trtls.route import build as route_build


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return fresh_sample(tmp_path_factory.mktemp("route-stop") / "route")


def _cancel_during_export(monkeypatch: pytest.MonkeyPatch, token: CancelToken) -> None:
    """The real exporter, and a stop that arrives while it runs (as a Ctrl-C would, from the loop's thread)."""
    real = route_build.EXPORTERS["tiny-mlp"]

    def export_then_stop(weights, config):
        model = real(weights, config)
        token.request("api")
        return model

    monkeypatch.setitem(route_build.EXPORTERS, "tiny-mlp", export_then_stop)


@pytest.mark.parametrize("route", ["tiny_ort", "tiny"])  # a route that deploys its ONNX; a route with an engine
def test_a_stop_during_the_export_ends_cancelled_with_nothing_written(sample, tmp_path, monkeypatch, route) -> None:
    root = copy_sample(sample, tmp_path / "route")
    token = CancelToken()
    _cancel_during_export(monkeypatch, token)
    result = asyncio.run(route_build.build_route(root / "trtls.toml", route, cancel=token))
    assert result.outcome == "cancelled" and result.cancel_source == "api", result.message
    assert "during the ONNX export; the bundle was not touched" in result.message
    assert result.build_id is None  # no engine build was started after the stop
    assert not Path(result.bundle).exists()
    record = json.loads((root / ".trtls" / "routes" / route / "route-build.json").read_text())
    assert record["outcome"] == "cancelled" and record["cancel_source"] == "api"


def test_a_stop_before_the_build_starts_reads_nothing_more(sample, tmp_path) -> None:
    root = copy_sample(sample, tmp_path / "route")
    token = CancelToken()
    token.request("service_shutdown")
    result = asyncio.run(route_build.build_route(root / "trtls.toml", "tiny_ort", cancel=token))
    assert result.outcome == "cancelled" and "during the checkpoint read" in result.message
    assert not (root / "build" / "tiny_ort.onnx").exists()  # the export never ran


def _conversion_child(parent: int) -> int | None:
    """The pid of the route build's ModelOpt conversion child (`trtls.builds.worker.autocast_child`), if it is
    running."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == parent and b"trtls.builds.worker.autocast_child" in cmdline:
            return int(entry.name)
    return None


@pytest.mark.skipif(
    not os.environ.get("TRTLS_REQUIRE_PRECISION") and importlib.util.find_spec("modelopt") is None,
    reason="the precision extra (nvidia-modelopt) is not installed",
)
def test_ctrl_c_during_a_precision_conversion_exits_130_and_writes_no_bundle(sample, tmp_path) -> None:
    root = copy_sample(sample, tmp_path / "route")
    recipe = root / "trtls.toml"
    recipe.write_text(recipe.read_text() + '\n[routes.tiny_ort.precision]\nconvert = "fp16"\n')
    proc = subprocess.Popen(
        [sys.executable, "-m", "trtls", "route", "build", str(root), "--route", "tiny_ort"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # as in a terminal, not a background job
    )
    deadline = time.monotonic() + 300  # a bound for something that must happen, not a speed assertion
    child = None
    while child is None and proc.poll() is None:
        assert time.monotonic() < deadline, "the conversion child never started"
        child = _conversion_child(proc.pid)
        time.sleep(0.02)
    assert child is not None, proc.communicate()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 130, out + err
    assert "Traceback" not in err and "stopped by ctrl_c during the precision conversion" in out, out + err
    assert not (root / "build" / "tiny_ort.bundle").exists()
    assert not Path(f"/proc/{child}").exists() or b"autocast_child" not in Path(f"/proc/{child}/cmdline").read_bytes()


def test_a_stop_after_the_engine_is_built_writes_no_bundle(sample, tmp_path) -> None:
    """The window between the engine build's end and the bundle write: a stop there is a stop (the bundle stays as it
    was), and the route's result still names the build that ran, whose record says `built`."""
    root = copy_sample(sample, tmp_path / "route")
    token = CancelToken()

    def stop_when_the_build_ends(build) -> None:
        build.listeners.append(lambda _build, event: token.request("api") if event is None else None)

    result = asyncio.run(
        route_build.build_route(root / "trtls.toml", "tiny", on_build=stop_when_the_build_ends, cancel=token)
    )
    assert result.outcome == "cancelled" and result.cancel_source == "api", result.message
    assert "after the engine was built; the bundle was not touched" in result.message
    assert not Path(result.bundle).exists()
    assert result.build_id is not None and result.build_summary_path is not None
    assert json.loads(Path(result.build_summary_path).read_text())["outcome"] == "built"
    record = json.loads((root / ".trtls" / "routes" / "tiny" / "route-build.json").read_text())
    assert record["outcome"] == "cancelled" and record["build_id"] == result.build_id


def _stop_in_the_bundle_write(monkeypatch: pytest.MonkeyPatch, token: CancelToken) -> None:
    """The real bundle write, and a stop that arrives once it has begun (as a Ctrl-C would, from the loop's thread)."""
    from trtls.route import publish

    real = publish.write_bundle

    def stop_then_write(*args, **kwargs):
        token.request("api")
        return real(*args, **kwargs)

    monkeypatch.setattr(publish, "write_bundle", stop_then_write)


def _shipped_export_root(tmp_path: Path) -> Path:
    from tests.route.test_export_route import shipped_export

    return shipped_export(tmp_path / "shipped")


@pytest.mark.parametrize("route", ["tiny_ort", "shipped"])  # the ONNX route; the export route (no checkpoint)
def test_a_stop_during_a_bundle_write_with_no_engine_keeps_the_bundle_there_whole(
    sample, tmp_path, monkeypatch, route
) -> None:
    """The routes that build no engine wrote their bundle with no stop: a stop during the write was not seen, the new
    bundle replaced the old one and the route said `built`. Now their write stops before its rename, as the engine
    route's does: the bundle that was there stays as it was, no temp file, the result and its record `cancelled`."""
    root = copy_sample(sample, tmp_path / "route") if route == "tiny_ort" else _shipped_export_root(tmp_path)
    first = asyncio.run(route_build.build_route(root / "trtls.toml", route))
    assert first.outcome == "built", first.message
    bundle = Path(first.bundle)
    before, listing = bundle.read_bytes(), sorted(p.name for p in bundle.parent.iterdir())

    token = CancelToken()
    _stop_in_the_bundle_write(monkeypatch, token)
    result = asyncio.run(route_build.build_route(root / "trtls.toml", route, cancel=token))
    assert result.outcome == "cancelled" and result.cancel_source == "api", result.message
    assert "during the bundle's write; the bundle was not touched" in result.message
    assert bundle.read_bytes() == before
    assert sorted(p.name for p in bundle.parent.iterdir()) == listing  # no temp file left, nothing else written
    record = json.loads((root / ".trtls" / "routes" / route / "route-build.json").read_text())
    assert record["outcome"] == "cancelled" and record["cancel_source"] == "api"
