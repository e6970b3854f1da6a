"""The model a build read, in the record orphan recovery rebuilds after its supervisor died (issue 33): a real
`trtls build` SIGKILLed while its worker is held after the build (the worker's TRTLS_TEST_PAUSE hook, no sleeps),
then the recovery the language server runs on opening the folder.

Before: the recovered record named no model (`modelPath`, `modelSha256`), no start and no capability answer, so the
`onnx` hover said nothing of that build at all, and could not say whether the model changed since. Now it names the
model from the job in `running.json`, and its sha256 only when the model is provably the one read — not written
since the build started, and never through a link that leads out of the recipe's folder."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import time
from pathlib import Path
from typing import Any

from trtls.builds.supervisor.orphans import process_alive, recover_orphans
from trtls.core.recipe import load_recipe
from trtls.lsp.hover import hover_at

from .cli_procs import CliBuild, pause_env, wait_for_file


def _killed(ws: Path, tmp_path: Path) -> Path:
    """A real CLI build of `demo` SIGKILLed while its worker is held before the engine's rename (the model read and
    built), its worker gone by itself; the run folder, with its `running.json` and no summary."""
    pause = tmp_path / "pause"
    cli = CliBuild(ws, "demo", env=pause_env(pause, "before_rename"))
    marker = wait_for_file(pause, ".before_rename")
    build_id, worker = marker.name.removesuffix(".before_rename"), int(marker.read_text())
    cli.proc.send_signal(signal.SIGKILL)
    cli.proc.wait()
    deadline = time.monotonic() + 60
    while process_alive(worker):  # it sees its stdin close and stops by itself
        assert time.monotonic() < deadline, f"worker {worker} still alive"
        time.sleep(0.02)
    run = ws / ".trtls" / "runs" / build_id
    assert (run / "running.json").exists() and not (run / "summary.json").exists()
    return run


def _recovered(ws: Path, run: Path) -> dict[str, Any]:
    [done] = recover_orphans(ws / ".trtls")
    assert done.build_id == run.name
    return json.loads((run / "summary.json").read_text())


def _onnx_hover(ws: Path) -> str:
    """The `onnx` key's hover of `demo`, as the server answers it (without a loop the model is hashed in place)."""
    text = (ws / "trtls.toml").read_text()
    lines = text.splitlines()
    start = lines.index("[engines.demo]")
    line = next(i for i in range(start + 1, len(lines)) if lines[i].startswith("onnx ="))
    said = hover_at(load_recipe(ws / "trtls.toml", text), line, 1)
    assert said is not None
    return said


def test_a_killed_builds_record_names_the_model_it_read_and_its_hover_says_whether_it_changed(
    workspace: Path, tmp_path: Path
) -> None:
    model = workspace / "models" / "demo.onnx"
    run = _killed(workspace, tmp_path)
    record = _recovered(workspace, run)
    assert record["outcome"] == "killed"
    assert record["modelPath"] == str(model.resolve())
    assert record["modelSha256"] == hashlib.sha256(model.read_bytes()).hexdigest()
    assert model.stat().st_mtime <= record["startedAt"] <= time.time()  # the build's start, from running.json
    assert any("the model the build read: unchanged since it started" in k for k in record["known"]), record["known"]
    assert record["capability"]["status"] == "parsed" and "killed" in record["capability"]["builder"]["reason"]

    said = _onnx_hover(workspace)  # the recovered build is the engine's last one: the hover says of it
    assert run.name in said and "What TensorRT said at the build of" in said, said
    assert "Model unchanged: it is the one that build read (same sha256)" in said, said

    model.write_bytes(model.read_bytes() + b"\0")  # edited after the build (a byte past the protobuf's end)
    said = _onnx_hover(workspace)
    assert "the model changed since this build" in said and "Model unchanged" not in said, said


def test_a_model_written_after_the_build_started_is_not_vouched_for(workspace: Path, tmp_path: Path) -> None:
    model = workspace / "models" / "demo.onnx"
    run = _killed(workspace, tmp_path)
    model.write_bytes(model.read_bytes())  # the same bytes, written after the start: either may be the one read
    record = _recovered(workspace, run)
    assert record["modelPath"] == str(model.resolve()) and record["modelSha256"] is None
    assert any("written after the build started" in u for u in record["unknown"]), record["unknown"]
    said = _onnx_hover(workspace)
    assert "Whether the model changed since this build is not known: its record names no model sha256" in said
    assert "Model unchanged" not in said, said


def test_a_model_that_leads_out_of_the_recipes_folder_is_not_read(workspace: Path, tmp_path: Path) -> None:
    run = _killed(workspace, tmp_path)
    outside = tmp_path / "elsewhere.onnx"  # older than the build, so only the link decides
    outside.write_bytes((workspace / "models" / "demo.onnx").read_bytes())
    os.utime(outside, (1_000_000, 1_000_000))
    link = workspace / "models" / "planted.onnx"
    link.symlink_to(outside)
    state = json.loads((run / "running.json").read_text())
    state["job"]["onnx"] = str(link)  # a record can be planted: it names a link leading out
    (run / "running.json").write_text(json.dumps(state))
    record = _recovered(workspace, run)
    assert record["modelPath"] == str(link) and record["modelSha256"] is None
    assert any("leads out of the recipe's folder" in u for u in record["unknown"]), record["unknown"]


def test_an_output_outside_the_recipes_folder_is_not_hashed_or_looked_at(workspace: Path, tmp_path: Path) -> None:
    """A planted `running.json` named `/etc/shadow` as its output: recovery hashed it (no size limit) and wrote its
    sha256 into the record and the terminal. An output outside the recipe's folder — named outright or through a
    folder link that leads out — is not read; the record says so and claims nothing of what is there."""
    from trtls.builds.supervisor.orphans import RecoveryPass

    run = _killed(workspace, tmp_path)
    secret = tmp_path / "outside" / "secret.engine"
    secret.parent.mkdir()
    secret.write_bytes(b"not yours")
    (workspace / "out-link").symlink_to(secret.parent)
    state = json.loads((run / "running.json").read_text())
    for named in (str(secret), str(workspace / "out-link" / "secret.engine")):
        state["output"] = named  # a record can be planted: it names a file outside
        (run / "running.json").write_text(json.dumps(state))
        (run / "summary.json").unlink(missing_ok=True)
        work = RecoveryPass()
        [done] = recover_orphans(workspace / ".trtls", work=work)  # (it removes running.json: written again above)
        record = json.loads((run / "summary.json").read_text())
        assert work.hashed == 0, "a file outside the recipe's folder was read"
        assert "sha256" not in record["engineOnDisk"] and record["engineArtifact"] is None, record["engineOnDisk"]
        assert hashlib.sha256(b"not yours").hexdigest() not in json.dumps(record) + done.message
        assert any("outside the recipe's folder" in u for u in record["unknown"]), record["unknown"]
        assert "outside the recipe's folder and was not looked at" in done.message, done.message
