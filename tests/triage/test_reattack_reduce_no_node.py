"""A model with no node to cut (its input is its output) whose build fails the way `--fail-regex` says: the
reduction once ended `failed: the reduction failed while cutting candidates: IndexError: list index out of range`.
There is nothing smaller to cut: the whole model is the smallest failing one (`not_reduced`, exit 1), said so."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import onnx
from onnx import TensorProto, helper

RECIPE = """[engines.m]
onnx = "empty.onnx"
output = "build/m.engine"

[[engines.m.profiles]]
input = "x"
min = [1, 16, 64]
opt = [2, 16, 64]
max = [4, 16, 64]
"""


def test_a_model_without_a_node_is_not_reduced_not_an_index_error(tmp_path: Path) -> None:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 16, 64])
    graph = helper.make_graph([], "g", [x], [x])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(tmp_path / "empty.onnx"))
    (tmp_path / "trtls.toml").write_text(RECIPE)
    cmd = [sys.executable, "-m", "trtls", "reduce", str(tmp_path), "--fail-regex", ".", "--json"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith('{"kind": "reduction"')]
    assert lines, done.stderr[-1500:]
    record = json.loads(lines[-1])
    assert record["error"] is None and "IndexError" not in done.stderr, (record["error"], done.stderr[-800:])
    assert record["outcome"] == "not_reduced" and done.returncode == 1, (record["outcome"], done.returncode)
    assert "the whole model (0 nodes) is the smallest failing one" in record["causeText"], record["causeText"]
