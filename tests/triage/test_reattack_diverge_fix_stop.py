"""`trtls reduce --diverge --fix` stopped (here by --timeout) after the first comparison, while the exclusion of the
first diverging node was being converted: nothing measured whether an exclusion fixes it. The record once said
`fixed: false` and the terminal "proposal: [precision] exclude_nodes = []" and "not fixed within the rounds: no
exclusion was measured to pass"; now `fixed` is null (not checked), the proposal is the first diverging node, and
the terminal says the stop came first."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.triage.diverge_model import RECIPE, write_model


def _diverge(ws: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "trtls", "reduce", str(ws), "--engine", "enc", "--diverge", *extra]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600)


def test_a_fix_stopped_before_its_exclusion_was_measured_claims_nothing(tmp_path: Path) -> None:
    (tmp_path / "models").mkdir()
    write_model(tmp_path / "models" / "enc.onnx")
    (tmp_path / "trtls.toml").write_text(RECIPE)
    assert _diverge(tmp_path).returncode == 0, "the conversion without exclusion is cached: round 1 is quick"
    caught = None
    for timeout in ("1.5", "2", "2.5", "3", "3.5", "4", "5"):
        done = _diverge(tmp_path, "--fix", "--timeout", timeout)
        record = json.loads(sorted((tmp_path / ".trtls" / "reduce").glob("*/divergence.json"))[-1].read_text())
        if done.returncode == 124 and len(record["rounds"]) == 1 and record["firstDiverging"] is not None:
            caught = done, record
            break
    assert caught is not None, "a stop landed between the first comparison and the second"
    done, record = caught
    assert record["cancelled"] and record["fixed"] is None, record["fixed"]
    assert "proposal: [precision] exclude_nodes = ['proj_tiny']" in done.stdout, done.stdout
    assert "not fixed within the rounds" not in done.stdout and "not checked: the stop came first" in done.stdout
