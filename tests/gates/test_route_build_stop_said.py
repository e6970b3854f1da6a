"""`trtls route build` has one stop across its steps, and says what it stops.

The keys the engine build installed replaced the route's own: a Ctrl-C once the engine was built went to a build that
had ended (it stopped nothing), said `stopping tiny (cooperative; Ctrl-C again to force)…`, and the bundle step —
run on the event loop, which answered the key only after it — wrote the bundle and exited 0. Now the route's stop
stays its own (the engine build takes it as its cancel), says the step (`tiny is built already; stopping route
tiny's bundle step …`), and the bundle step runs off the loop and stops before the bundle's rename: no bundle, no
temp file, the run's record `cancelled`, the engine build's record `built`.

A real `trtls route build` of the route sample (real TensorRT-RTX build on the CPU), held at the start of its bundle
step (the real `publish_bundle` runs once the test lets it go: it only waits), given a real SIGINT there."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from test_route_build import copy_sample, fresh_sample

HELD = """
import os, sys, time
from pathlib import Path

import trtls.route.build as route_build
from trtls.cli.main import main

real = route_build.publish_bundle


def held(*args, **kwargs):  # the bundle step, held until the test has signalled the command
    Path(os.environ["HELD_MARK"]).write_text("in the bundle step")
    deadline = time.monotonic() + 300
    while not Path(os.environ["HELD_GO"]).exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    return real(*args, **kwargs)


route_build.publish_bundle = held
sys.argv = ["trtls", *sys.argv[1:]]
sys.exit(main())
"""


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return fresh_sample(tmp_path_factory.mktemp("route-stop-said") / "route")


class Lines:
    """A stream's lines as they come, read on a thread."""

    def __init__(self, stream) -> None:
        self.lines: list[str] = []
        self.thread = threading.Thread(target=lambda: self.lines.extend(iter(stream.readline, "")), daemon=True)
        self.thread.start()

    def wait_for(self, text: str, bound_s: float) -> bool:
        deadline = time.monotonic() + bound_s  # a bound for something that must happen, not a speed assertion
        while time.monotonic() < deadline:
            if any(text in line for line in list(self.lines)):
                return True
            time.sleep(0.05)
        return False


def test_ctrl_c_in_the_bundle_step_says_it_and_writes_no_bundle(sample: Path, tmp_path: Path) -> None:
    root = copy_sample(sample, tmp_path / "route")
    script = tmp_path / "held_route_build.py"
    script.write_text(HELD)
    mark, go = tmp_path / "in-bundle-step", tmp_path / "go"
    proc = subprocess.Popen(
        [sys.executable, str(script), "route", "build", str(root), "--route", "tiny"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "HELD_MARK": str(mark), "HELD_GO": str(go)},
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # as in a terminal, not a background job
    )
    err = Lines(proc.stderr)
    try:
        deadline = time.monotonic() + 300
        while not mark.exists():
            assert proc.poll() is None and time.monotonic() < deadline, "".join(err.lines)
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        said = err.wait_for("stopping route tiny's bundle step", 60)  # the loop answers while the step runs
        go.write_text("")
        out = proc.stdout.read() if proc.stdout else ""
        proc.wait(timeout=300)
    finally:
        go.write_text("")
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    err.thread.join(timeout=30)
    text = "".join(err.lines)
    assert said, f"the stop did not say the bundle step while it ran:\n{text}"
    assert "tiny is built already; stopping route tiny's bundle step (a bundle is written whole or not at all)…" in text
    assert "cooperative" not in text and "Traceback" not in text, text
    assert proc.returncode == 130, out + text
    assert "stopped by ctrl_c during the bundle's assembly, after the engine was built" in out, out

    bundle = root / "build" / "tiny.bundle"
    assert not bundle.exists() and not bundle.with_name("tiny.bundle.sidecar.json").exists()
    assert [p.name for p in bundle.parent.iterdir() if "bundle" in p.name] == [], list(bundle.parent.iterdir())
    record = json.loads((root / ".trtls" / "routes" / "tiny" / "route-build.json").read_text())
    assert record["outcome"] == "cancelled" and record["cancel_source"] == "ctrl_c", record
    assert json.loads(Path(record["build_summary_path"]).read_text())["outcome"] == "built"
