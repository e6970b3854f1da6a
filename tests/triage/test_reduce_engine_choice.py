"""`trtls reduce` without `--engine`, in the real CLI process: a recipe with one engine reduces (or compares) that
engine; a recipe with several is a located usage error naming them, exit 2 — never `no engine named None`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.triage.diverge_model import RECIPE
from tests.triage.diverge_model import write_model as _diverge_model
from tests.triage.test_reduce_cases import _engine, _if_first


def _trtls(ws: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "trtls", "reduce", str(ws), *args], capture_output=True, text=True, timeout=600
    )


def _last_record(stdout: str) -> dict | None:
    lines = [ln for ln in stdout.splitlines() if ln.startswith("{")]
    return json.loads(lines[-1]) if lines else None


@pytest.mark.parametrize("extra", [[], ["--diverge"]], ids=["build", "diverge"])
def test_several_engines_and_no_engine_named_is_a_usage_error_naming_them(tmp_path: Path, extra: list[str]) -> None:
    _if_first(tmp_path / "m.onnx", after=0)
    (tmp_path / "trtls.toml").write_text(
        _engine("a", "m.onnx", "[N, 16]", smem=False) + _engine("b", "m.onnx", "[N, 16]", smem=False)
    )
    proc = _trtls(tmp_path, *extra)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    need = "--engine NAME or --route NAME" if extra else "--engine NAME"
    said = f"{tmp_path / 'trtls.toml'}: TRT107 {need} is needed: this recipe has 2 engines (a, b)"
    assert said in proc.stderr, proc.stderr
    assert "None" not in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / ".trtls" / "reduce").exists(), "nothing was started"
    as_json = _trtls(tmp_path, *extra, "--json")  # a script reading stdout learns why too
    record = _last_record(as_json.stdout)
    assert as_json.returncode == 2 and record is not None and record["code"] == "TRT107", as_json.stdout
    assert "(a, b)" in record["message"] and record["file"] == str(tmp_path / "trtls.toml")


def test_the_only_engine_is_reduced_when_none_is_named(tmp_path: Path) -> None:
    """A one-node failing model (TensorRT-RTX 1.7 fails the If): the reduction of `m` runs — nothing smaller fails."""
    _if_first(tmp_path / "m.onnx", after=0)
    (tmp_path / "trtls.toml").write_text(_engine("m", "m.onnx", "[N, 16]", smem=False))
    proc = _trtls(tmp_path, "--json")
    record = _last_record(proc.stdout)
    assert record is not None and record.get("kind") == "reduction", proc.stdout + proc.stderr[-2000:]
    assert record["engine"] == "m" and record["outcome"] == "not_reduced", record
    assert proc.returncode == 1 and "None" not in proc.stderr


def test_the_only_engines_onnx_is_the_reference_of_a_candidate_when_none_is_named(tmp_path: Path) -> None:
    (tmp_path / "models").mkdir()
    _diverge_model(tmp_path / "models" / "enc.onnx")
    (tmp_path / "trtls.toml").write_text(RECIPE)
    proc = _trtls(tmp_path, "--diverge", "--candidate", str(tmp_path / "models" / "enc.onnx"), "--json")
    record = _last_record(proc.stdout)
    assert proc.returncode == 1 and record is not None, proc.stdout + proc.stderr[-2000:]  # the same model: no tensor
    assert record["mode"] == "models" and record["engine"] == "enc" and record["firstDiverging"] is None, record
