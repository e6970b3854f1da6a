"""A reduction stopped (`--max-trials`, Ctrl-C) after a smaller failing model but before the settings the recipe
changes were put back measured no cause: its record never says "the model is the cause" — the quickstart's demo,
whose cause is `tactic_shared_memory_kib = 32`, once said the model was, when its budget ran out mid-bisection."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from .reduce_models import failing_demo


def reduce(ws: Path, *extra: str) -> tuple[int, dict, str]:
    cmd = [sys.executable, "-m", "trtls", "reduce", str(ws), "--engine", "demo", "--json", *extra]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith('{"kind": "reduction"')]
    assert lines, proc.stderr[-2000:]
    return proc.returncode, json.loads(lines[-1]), proc.stderr


def test_a_budget_stop_before_the_settings_trial_names_no_cause(tmp_path: Path) -> None:
    ws = failing_demo(tmp_path)
    _, record, _ = reduce(ws, "--max-trials", "4")
    assert record["outcome"] == "stopped" and record["minimal"] is not None, record["causeText"]
    assert record["originalNodes"] > record["minimal"]["nodes"]
    assert "settings" not in record["trialsByStep"], "the stop came before any setting was put back"
    assert record["cause"] is None, record["cause"]
    assert "the model is the cause" not in record["causeText"], record["causeText"]
    assert "tactic_shared_memory_kib" in record["causeText"] and "not checked" in record["causeText"]
    # the uninterrupted reduction measures the setting as the cause: what the stopped one must not contradict
    code, whole, _ = reduce(ws)
    assert code == 0 and whole["cause"] == "configuration", whole["causeText"]


def test_a_budget_stop_before_any_smaller_failing_model_does_not_exit_0(tmp_path: Path) -> None:
    """`--max-trials 1`: the failure reproduced, then the budget ran out — no minimal model, "no cause found before
    the stop": exit 1 (exit 0 is a cause found), the record kept."""
    ws = failing_demo(tmp_path)
    code, record, stderr = reduce(ws, "--max-trials", "1")
    assert record["outcome"] == "stopped" and record["minimal"] is None, record["causeText"]
    assert code == 1, (code, stderr[-1000:])
    code, record, _ = reduce(ws, "--max-trials", "3")
    assert record["outcome"] == "stopped" and record["minimal"] is not None and code == 0, (code, record["causeText"])
