"""A build for certain (`trtls build --engine NAME --no-store` or `--rebuild`) starts its worker first of all, from
the program's entry (builds/supervisor/worker_launch.start_ahead), before the command imports what reads the recipe —
the worker's start (its interpreter, TensorRT's import) is the build's critical path and runs beside those imports —
and the worker that builds is that one. An engine that wants another builder module gets a worker of its own, and
the one started ahead ends without building.

Real processes: the `trtls` program as its console script runs it, with every process it starts recorded (the argv,
and which of the CLI's modules were loaded then), a real TensorRT-RTX build of the quickstart's `demo`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

DRIVER = """
import json, os, subprocess, sys
spawned = []
start = subprocess.Popen._execute_child
def record(self, args, *rest, **kw):
    spawned.append({"argv": [str(a) for a in args], "loaded": sorted(m for m in sys.modules if m.startswith("trtls."))})
    start(self, args, *rest, **kw)
    spawned[-1]["pid"] = self.pid
subprocess.Popen._execute_child = record
import atexit
atexit.register(lambda: os.write(2, ("\\nSPAWNED " + json.dumps(spawned) + "\\n").encode()))
from trtls.cli.entry import main
sys.argv = ["trtls", *sys.argv[1:]]
sys.exit(main())
"""


def _build(workspace: Path, *flags: str) -> tuple[subprocess.CompletedProcess[str], list[dict]]:
    proc = subprocess.run(
        [sys.executable, "-c", DRIVER, "build", str(workspace), "--engine", "demo", *flags],
        capture_output=True,
        text=True,
        timeout=600,
    )
    line = next(ln for ln in proc.stderr.splitlines() if ln.startswith("SPAWNED "))
    return proc, [s for s in json.loads(line[len("SPAWNED ") :]) if "trtls.builds.worker" in s["argv"]]


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def test_a_certain_build_starts_its_worker_before_the_recipe_readers_and_builds_with_it(workspace: Path) -> None:
    for flags in (("--no-store",), ("--rebuild",)):
        proc, workers = _build(workspace, *flags)
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert len(workers) == 1, workers  # the worker started ahead is the one that built
        assert workers[0]["argv"][-2:] == ["--preload", "auto"]
        loaded = set(workers[0]["loaded"])
        # started before the fast path's modules, the raw recipe's reader and the store's key
        assert not loaded & {"trtls.cli.store_lookup", "trtls.core.toml_bounded", "trtls.app.unchanged"}, loaded
        assert not any(m.startswith(("trtls.store", "trtls.core.recipe")) for m in loaded), loaded
    runs = sorted((workspace / ".trtls" / "runs").glob("demo-*"))
    assert len(runs) == 2
    for run in runs:
        summary = json.loads((run / "summary.json").read_text())
        assert summary["outcome"] == "built", summary


def test_an_engine_that_wants_another_builder_module_gets_its_own_worker_and_the_one_ahead_ends(
    workspace: Path,
) -> None:
    recipe = workspace / "trtls.toml"
    text = recipe.read_text()
    line = 'onnx = "models/demo.onnx"\n'
    recipe.write_text(text.replace(line, line + 'builder_module = "tensorrt_rtx"\n', 1))
    proc, workers = _build(workspace, "--no-store")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert [w["argv"][-1] for w in workers] == ["auto", "tensorrt_rtx"], workers
    assert not _running(workers[0]["pid"]), "the worker started ahead is still running after the command ended"
    summary = json.loads(next((workspace / ".trtls" / "runs").glob("demo-*/summary.json")).read_text())
    assert summary["outcome"] == "built"
    assert os.path.isfile(workspace / "build" / "demo.engine")


CTRL_C_DRIVER = """
import json, os, subprocess, sys
from trtls.builds.supervisor import worker_launch
started = worker_launch.start_ahead
pid = []
def ahead_then_ctrl_c(parked=False):
    started(parked=parked)
    pid.append(worker_launch._AHEAD.pid)
    raise KeyboardInterrupt  # the person's Ctrl-C, just after the worker was started ahead
worker_launch.start_ahead = ahead_then_ctrl_c
from trtls.cli.entry import main
code = main(["build", sys.argv[1], "--engine", "demo", *sys.argv[2:]])
os.write(1, json.dumps({"code": code, "pid": pid[0]}).encode())
"""


@pytest.mark.parametrize("flags", [["--no-store"], []], ids=["certain", "parked"])
def test_a_ctrl_c_just_after_the_worker_started_ahead_is_the_persons_stop_and_the_worker_ends(
    workspace: Path, flags: list[str]
) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", CTRL_C_DRIVER, str(workspace), *flags], capture_output=True, text=True, timeout=120
    )
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert "trtls build: interrupted by Ctrl-C" in proc.stderr
    got = json.loads(proc.stdout)
    assert got["code"] == 130
    # ended at once (worker_launch.drop_unadopted: killed and reaped), building nothing
    deadline = time.monotonic() + 60
    while _running(got["pid"]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _running(got["pid"]), "the worker started ahead did not end after the command ended"
    assert not (workspace / ".trtls" / "runs").exists() and not (workspace / "build").exists(), "nothing is built"
