"""`trtls reduce --diverge --inputs FILE` with inputs no error can be measured on: an array of NaN (the reference is
NaN everywhere, every tensor's error was taken over no element) or an empty batch (no element at all). Both once
ended "no tensor leaves tolerance: the converted model stays within it", every tensor recorded within tolerance with
an error of 0.0 — a verdict nothing measured. Both are a usage error now (TRT104, exit 2), said before anything runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np

from tests.triage.diverge_model import RECIPE, write_model


def _diverge(ws: Path, inputs: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "trtls", "reduce", str(ws), "--engine", "enc", "--diverge", "--inputs", inputs]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=ws)


def test_inputs_no_error_can_be_measured_on_are_refused(tmp_path: Path) -> None:
    (tmp_path / "models").mkdir()
    write_model(tmp_path / "models" / "enc.onnx")
    (tmp_path / "trtls.toml").write_text(RECIPE)
    np.savez(tmp_path / "nan.npz", x=np.full((4, 64), np.nan, np.float32))
    np.savez(tmp_path / "empty.npz", x=np.zeros((0, 64), np.float32))
    for name, words in (("nan.npz", "256 inf/NaN values"), ("empty.npz", "x is empty (shape [0, 64])")):
        done = _diverge(tmp_path, name)
        assert done.returncode == 2, (name, done.returncode, done.stdout[-1500:], done.stderr[-1500:])
        assert "TRT104" in done.stderr and words in done.stderr, done.stderr[-1500:]
        assert "within" not in done.stdout, done.stdout
    assert not list((tmp_path / ".trtls").glob("reduce/diverge-*/divergence.json")), "no record of a comparison"
    np.savez(tmp_path / "good.npz", x=np.ones((4, 64), np.float32))
    assert _diverge(tmp_path, "good.npz").returncode in (0, 1), "finite inputs are compared"
