"""The fast path (`trtls build DIR --engine NAME` answered from `.trtls/engines/NAME.hit.json` before the recipe is
loaded) writes only where the recipe's own check would let a build write (issue 27: one policy, no way around it),
and serves only from a store the full path would trust (TRT340). Each case fails on the code before: the fast path
restored the store's engine to the memo's `output` bounded only by the recipe's folder, and never judged the store.
(The hard-link case held before too — a restore renames a new file over the name — and guards the inode rule.)

Real builds of the quickstart `demo` into a real store; real symlinks, hard links and a forged memo."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.store.helpers import summaries


def _sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def _build(ws: Path) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "trtls", "build", str(ws), "--engine", "demo"]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600)


def _project(workspace: Path, tmp_path: Path, output: str) -> Path:
    text = (workspace / "trtls.toml").read_text().replace('output = "build/demo.engine"', f'output = "{output}"', 1)
    (workspace / "trtls.toml").write_text(text + f'\n[store]\npath = "{tmp_path / "store"}"\n')
    return workspace


def _fast_sources(ws: Path) -> list[str]:
    return [str((s.get("store") or {}).get("source")) for s in summaries(ws) if s.get("outcome") == "reused"]


def test_the_fast_path_still_serves_a_plain_rebuild(workspace: Path, tmp_path: Path) -> None:
    """The control: with nothing changed, the second build is the fast path's reuse (its record says `memo`)."""
    ws = _project(workspace, tmp_path, "build/demo.engine")
    assert _build(ws).returncode == 0
    (ws / "build" / "demo.engine").unlink()
    again = _build(ws)
    assert again.returncode == 0 and "up to date" in again.stdout, again.stdout + again.stderr
    assert _fast_sources(ws) == ["memo"]
    (fast,) = [s["store"] for s in summaries(ws) if s.get("outcome") == "reused"]
    assert fast["trust"] == "user" and "signingKey" in fast  # which store and trust served it, as the full path


def test_an_output_folder_swapped_for_a_link_to_the_models_never_gets_the_engine(
    workspace: Path, tmp_path: Path
) -> None:
    ws = _project(workspace, tmp_path, "out/demo.onnx")
    (ws / "out").mkdir()
    assert _build(ws).returncode == 0  # published, memo written
    shutil.rmtree(ws / "out")
    (ws / "out").symlink_to("models")  # out/demo.onnx is now the model itself
    model = _sha(ws / "models" / "demo.onnx")
    done = _build(ws)
    assert _sha(ws / "models" / "demo.onnx") == model, "the fast path restored the engine over the model"
    assert done.returncode != 0 and "Traceback" not in done.stderr, done.stdout + done.stderr
    assert "TRT109" in done.stdout + done.stderr or "TRT118" in done.stdout + done.stderr, done.stdout + done.stderr


def test_a_memo_naming_the_recipe_as_the_output_is_not_followed(workspace: Path, tmp_path: Path) -> None:
    ws = _project(workspace, tmp_path, "build/demo.engine")
    assert _build(ws).returncode == 0
    memo = ws / ".trtls" / "engines" / "demo.hit.json"
    record = json.loads(memo.read_text())
    record["output"] = str(ws / "trtls.toml")  # a forged or damaged record names the recipe as the output
    memo.write_text(json.dumps(record))
    recipe = (ws / "trtls.toml").read_bytes()
    _build(ws)
    assert (ws / "trtls.toml").read_bytes() == recipe, "the fast path restored the engine over the recipe"


def test_an_output_that_became_a_hard_link_of_the_model_is_not_written(workspace: Path, tmp_path: Path) -> None:
    ws = _project(workspace, tmp_path, "build/demo.engine")
    assert _build(ws).returncode == 0
    (ws / "build" / "demo.engine").unlink()
    os.link(ws / "models" / "demo.onnx", ws / "build" / "demo.engine")  # the output's name is now the model too
    model = _sha(ws / "models" / "demo.onnx")
    _build(ws)
    assert _sha(ws / "models" / "demo.onnx") == model, "the engine was written into the model through its link"


def test_a_world_writable_store_is_refused_by_the_fast_path_too(workspace: Path, tmp_path: Path) -> None:
    ws = _project(workspace, tmp_path, "build/demo.engine")
    assert _build(ws).returncode == 0
    (tmp_path / "store").chmod(0o777)
    (ws / "build" / "demo.engine").unlink()
    done = _build(ws)
    assert "TRT340" in done.stdout + done.stderr, done.stdout + done.stderr  # the full path says it
    assert "memo" not in _fast_sources(ws)
