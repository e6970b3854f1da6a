"""What `trtls reduce` prints, in the real CLI process: a trial a stop ended is `cancelled (no verdict)`, never
`does not reproduce`; two given models (`--diverge --candidate`) are said as the candidate, with the reference's
tensors left out of the comparison counted."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import onnx

from tests.triage.diverge_model import RECIPE
from tests.triage.diverge_model import write_model as _diverge_model


def _building(ws: Path, proc: subprocess.Popen[str]) -> bool:
    """A trial's build has started (its running record is on disk), or the command already ended."""
    return proc.poll() is not None or any((ws / ".trtls" / "runs").glob("*/running.json"))


def test_a_trial_a_stop_ended_is_printed_as_no_verdict(workspace: Path) -> None:
    """The quickstart `large` (48 profiles, a half-minute build) as the trial: Ctrl-C once its build has started ends
    it cooperatively; the trial's line says it has no verdict."""
    cmd = [sys.executable, "-m", "trtls", "reduce", str(workspace), "--engine", "large"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    while not _building(workspace, proc):  # a state, not a time: the command's own bound is communicate's below
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 130, out + err[-2000:]
    (trial,) = [ln for ln in out.splitlines() if ln.lstrip().startswith("trial ")]
    assert "confirm" in trial and "cancelled (no verdict)" in trial, trial
    assert "does not reproduce" not in out


def _renamed(reference: Path, candidate: Path, tensor: str) -> None:
    """The same model with one intermediate tensor renamed: it computes the same, but the reference's `tensor` has no
    counterpart in it to compare."""
    model = onnx.load(str(reference))
    for node in model.graph.node:
        node.input[:] = [f"{tensor}_renamed" if i == tensor else i for i in node.input]
        node.output[:] = [f"{tensor}_renamed" if o == tensor else o for o in node.output]
    onnx.save(model, str(candidate))


def test_two_models_within_tolerance_are_said_as_the_candidate_with_what_was_not_compared(tmp_path: Path) -> None:
    (tmp_path / "models").mkdir()
    reference = tmp_path / "models" / "enc.onnx"
    _diverge_model(reference)
    (tmp_path / "trtls.toml").write_text(RECIPE)
    _renamed(reference, tmp_path / "candidate.onnx", "h0")
    np.savez(tmp_path / "inputs.npz", x=np.random.default_rng(3).standard_normal((4, 64)).astype(np.float32))
    cmd = [sys.executable, "-m", "trtls", "reduce", str(tmp_path), "--engine", "enc", "--diverge"]
    cmd += ["--candidate", str(tmp_path / "candidate.onnx"), "--inputs", str(tmp_path / "inputs.npz")]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 1, proc.stdout + proc.stderr[-2000:]  # nothing diverges: no tensor found
    said = "no tensor leaves tolerance: the candidate model stays within it on these inputs"
    assert said in proc.stdout and "converted model" not in proc.stdout, proc.stdout
    assert "(4 tensors compared; 1 of the reference's not compared: h0)" in proc.stdout, proc.stdout


def test_a_trial_forced_after_a_stop_ends_the_reduction_with_no_verdict(workspace: Path, tmp_path: Path) -> None:
    """The trial's builder is inside one long call (its worker held at the test pause and SIGSTOPped) when Ctrl-C
    comes: the cancel cannot be seen, the grace (1 s here) runs out and the worker is forced. That trial has no
    verdict either — the reduction stops (exit 130) instead of taking the forced build as the failure to reduce."""
    from tests.builds.cli_procs import pause_env

    recipe = workspace / "trtls.toml"
    recipe.write_text(recipe.read_text().replace("cancel_grace_s = 10", "cancel_grace_s = 1", 1))  # demo's table
    pause = tmp_path / "pause"
    cmd = [sys.executable, "-m", "trtls", "reduce", str(workspace), "--engine", "demo"]
    env = {**os.environ, **pause_env(pause, "before_build")}
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        while not (found := sorted(pause.glob("*.before_build"))):  # a state: the command's own end fails it
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.05)
        marker = found[0]
        os.kill(int(marker.read_text()), signal.SIGSTOP)  # no callback will see the cancel
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, out + err[-2000:]
    (trial,) = [ln for ln in out.splitlines() if ln.lstrip().startswith("trial ")]
    assert "confirm" in trial and "(no verdict)" in trial, trial
    assert "does not reproduce" not in out and "not_reproduced" not in out, out
