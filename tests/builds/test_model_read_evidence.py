"""Every build record names the model it read (`modelPath`, `modelSha256`: builds.supervisor.summary.model_read), for
any outcome (issue 33): real `trtls build` runs of the quickstart — a model TensorRT-RTX's parser refuses (failed),
the `demo` built with a store (its digest is the store key's), and a build held before TensorRT builds while its
model is rewritten, then stopped with Ctrl-C (cancelled): that record vouches for no sha256, as either version may
be the one read."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import onnx

from tests.builds.cli_procs import CliBuild, pause_env, wait_for_bound, wait_for_file
from tests.lsp.test_recorded_answers_lsp import UNKNOWN_ENGINE, _unknown_op_model
from tests.store.helpers import summaries, with_store
from trtls.core.summary_record import Summary, read_summary
from trtls.store.known_good import KnownGood


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _build(ws: Path, engine: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "trtls", "build", str(ws), "--engine", engine, *extra],
        cwd=ws,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_a_failed_build_and_a_built_one_name_the_model_they_read(workspace: Path, tmp_path: Path) -> None:
    model = workspace / "models" / "unknown.onnx"
    _unknown_op_model(model)
    recipe = workspace / "trtls.toml"
    recipe.write_text(recipe.read_text() + UNKNOWN_ENGINE)
    with_store(workspace, tmp_path / "store")
    assert _build(workspace, "unknown").returncode != 0
    [failed] = summaries(workspace)
    assert failed["outcome"] == "failed" and failed["capability"]["status"] == "refused"
    assert failed["modelPath"] == str(model) and failed["modelSha256"] == _sha256(model)
    loaded = read_summary(workspace / ".trtls" / "runs" / failed["buildId"] / "summary.json")
    assert isinstance(loaded, Summary) and loaded.modelSha256 == _sha256(model)  # declared, read typed

    built = _build(workspace, "demo")
    assert built.returncode == 0, built.stderr
    record = next(s for s in summaries(workspace) if s["engine"] == "demo")
    demo = workspace / "models" / "demo.onnx"
    assert record["outcome"] == "built" and record["modelSha256"] == _sha256(demo)
    # the digest the store key was made of (its known-good record keeps the key's parts)
    known = KnownGood(workspace / ".trtls", "demo").find(record["buildId"])
    assert known is not None and known["parts"]["files"]["onnx"] == record["modelSha256"]


def test_a_model_rewritten_while_it_built_is_not_vouched_for(workspace: Path, tmp_path: Path) -> None:
    pause = tmp_path / "pause"
    cli = CliBuild(workspace, "demo", "--no-store", env=pause_env(pause, "before_build"))
    build_id = wait_for_file(pause, ".before_build").name.removesuffix(".before_build")
    wait_for_bound(workspace, "demo", build_id)  # the checked job may reach the worker before the build is bound
    demo = workspace / "models" / "demo.onnx"
    model = onnx.load(str(demo))
    model.doc_string = "rewritten while the build held its parse"
    onnx.save(model, str(demo))
    cli.interrupt()
    assert cli.finish() != 0
    summary = json.loads((workspace / ".trtls" / "runs" / build_id / "summary.json").read_text())
    assert summary["outcome"] == "cancelled"
    assert summary["modelPath"] == str(demo) and summary["modelSha256"] is None
