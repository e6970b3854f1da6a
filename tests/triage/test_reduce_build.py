"""`trtls reduce` on real failing builds (real TensorRT-RTX worker builds, the real CLI process): the
configuration case names the setting, silero-vad's If export reduces to a smaller model that still fails the
same way (checked by building the minimal model again, independently), and a Ctrl-C keeps what was found."""

from __future__ import annotations

import hashlib
import json
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import onnx
import pytest

from tests.onnx_files.third_party import fetch_all
from trtls.builds.supervisor.supervisor import Supervisor
from trtls.core.recipe import load_recipe
from trtls.core.summary_record import Summary
from trtls.core.triage_records import FailureSignature
from trtls.triage.signature import same_failure

SMEM = "[engines.demo.builder]\noptimization_level = 3\n"


def _reduce(ws: Path, engine: str, *extra: str) -> tuple[int, dict]:
    proc = subprocess.run(
        [sys.executable, "-m", "trtls", "reduce", str(ws), "--engine", engine, "--json", *extra],
        capture_output=True,
        text=True,
        timeout=900,
    )
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    assert lines, proc.stderr[-2000:]
    return proc.returncode, json.loads(lines[-1])


def _digests(ws: Path) -> dict[str, str]:
    return {
        str(p.relative_to(ws)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in ws.rglob("*")
        if p.is_file() and ".trtls" not in p.parts
    }


async def _rebuild(ws: Path, engine: str, record: dict, folder: Path, settings: dict | None = None) -> Summary:
    loaded = load_recipe(ws / "trtls.toml")
    overrides = {
        "onnx": str(folder / "minimal.onnx"),
        "output": str(ws / "check.engine"),
        "profiles": record["minimal"]["profiles"],
        "cache_mode": "off",
        **({"settings": settings} if settings else {}),
    }
    return await Supervisor().start(loaded, engine, overrides=overrides).wait()


async def test_a_setting_that_breaks_every_model_is_named_as_the_cause(workspace: Path) -> None:
    recipe = workspace / "trtls.toml"
    recipe.write_text(
        recipe.read_text().replace(SMEM, SMEM + "memory_pool_limits = { tactic_shared_memory_kib = 32 }\n")
    )
    before = _digests(workspace)
    code, record = _reduce(workspace, "demo")
    assert code == 0, record
    assert record["outcome"] == "configuration" and record["cause"] == "configuration"
    assert record["causeSettings"] == {"tactic_shared_memory_kib": 32}
    assert record["failure"]["kind"] == "internal_error" and record["failure"]["sourceFile"].startswith("kernel_gen")
    assert record["minimal"]["nodes"] < record["originalNodes"]
    assert _digests(workspace) == before, "a reduction changes no file the user owns"
    folder = workspace / ".trtls" / "reduce" / record["id"]
    # the minimal model, built again outside the reduction: the same failure with the setting, built without it
    again = await _rebuild(workspace, "demo", record, folder)
    assert same_failure(FailureSignature.model_validate(record["failure"]), again), again.failure
    fixed = await _rebuild(workspace, "demo", record, folder, {"tactic_shared_memory_kib": None})
    assert fixed.outcome == "built"


async def test_silero_vad_if_export_reduces_to_a_smaller_model_that_fails_the_same_way(tmp_path: Path) -> None:
    model = tmp_path / "vad.onnx"
    shutil.copyfile(fetch_all()["silero_vad_if"], model)
    (tmp_path / "trtls.toml").write_text(
        '[engines.vad]\nonnx = "vad.onnx"\noutput = "build/vad.engine"\n\n[[engines.vad.profiles]]\n'
        "inputs.input = { min = [1, 512], opt = [1, 512], max = [4, 512] }\n"
        "inputs.state = { min = [2, 1, 128], opt = [2, 1, 128], max = [2, 4, 128] }\n"
    )
    code, record = _reduce(tmp_path, "vad")
    assert code == 0, record
    assert record["outcome"] == "reduced" and record["cause"] == "model"
    assert record["failure"]["sourceFile"] == "graphScope.cpp" and record["failure"]["errorCode"] == 2
    folder = tmp_path / ".trtls" / "reduce" / record["id"]
    minimal = onnx.load(str(folder / "minimal.onnx"))
    onnx.checker.check_model(minimal)
    assert len(minimal.graph.node) == record["minimal"]["nodes"] < record["originalNodes"] == 121
    assert any(n.op_type == "If" for n in minimal.graph.node), "the If the failure is about is kept"
    # Polygraphy's bisections stay within 2 × ⌈log2(nodes)⌉ trials; the linear pass is counted apart
    steps = record["trialsByStep"]
    assert steps["outputs"] + steps["inputs"] <= record["bisectBound"]
    again = await _rebuild(tmp_path, "vad", record, folder)
    assert same_failure(FailureSignature.model_validate(record["failure"]), again), again.failure
    kept = {p.name for p in (folder / "trials").iterdir()}
    assert not any(name.endswith(".engine") for name in kept), "no trial engine is kept"
    failing = {f"{t['trial']:03d}.onnx" for t in record["trials"] if t["stillFails"] and t["step"] != "confirm"}
    assert kept == failing, "the failing candidates are the evidence; the others are removed"


def test_an_engine_that_builds_has_nothing_to_reduce(workspace: Path) -> None:
    code, record = _reduce(workspace, "demo")
    assert code == 1 and record["outcome"] == "not_reproduced"
    assert record["trialsUsed"] == 1 and record["minimal"] is None
    assert "nothing to reduce" in record["causeText"]
    # trtls report --reduction: the trial history as a picture, one bar per trial
    page = subprocess.run(
        [sys.executable, "-m", "trtls", "report", "--reduction", "latest", "--recipe", str(workspace), "-o", "-"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "Reduction · demo" in page and page.count("<rect ") == 1 and "not_reproduced" in page


@pytest.mark.parametrize("source", ["ctrl_c", "ci_timeout"])
def test_a_stop_ends_the_current_trial_and_keeps_the_smallest_failing_model(tmp_path: Path, source: str) -> None:
    shutil.copyfile(fetch_all()["silero_vad_if"], tmp_path / "vad.onnx")
    (tmp_path / "trtls.toml").write_text(
        '[engines.vad]\nonnx = "vad.onnx"\noutput = "build/vad.engine"\n\n[[engines.vad.profiles]]\n'
        "inputs.input = { min = [1, 512], opt = [1, 512], max = [4, 512] }\n"
        "inputs.state = { min = [2, 1, 128], opt = [2, 1, 128], max = [2, 4, 128] }\n"
    )
    cmd = [sys.executable, "-m", "trtls", "reduce", str(tmp_path), "--engine", "vad"]
    if source == "ci_timeout":
        # a timeout long enough for the first trials on any machine is still a stop: the record says which
        cmd += ["--timeout", "1"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    if source == "ctrl_c":
        for line in proc.stdout:  # after the first trial of the bisection has ended, stop during the next
            if " outputs " in line:
                proc.send_signal(signal.SIGINT)
                break
    proc.communicate(timeout=300)
    assert proc.returncode == (130 if source == "ctrl_c" else 124)
    (folder,) = (tmp_path / ".trtls" / "reduce").iterdir()
    record = json.loads((folder / "result.json").read_text())
    assert record["outcome"] == "cancelled" and record["stoppedBy"] == source
    if source == "ci_timeout" and not record["trials"]:
        # the timeout came while the model was still being read and probed (a loaded machine): a stop before the
        # first trial is a state of its own — no trial started after it, nothing kept, nothing left behind
        assert record["trialsAtStop"] == 0 and record["stoppedDuringTrial"] is None and record["minimal"] is None
        assert not list(tmp_path.rglob("*.trtls-tmp-*")) and not (tmp_path / "build").exists()
        return
    last = record["trials"][-1]
    assert last["outcome"] in ("cancelled", "failed", "built"), last
    # the bound of a stop, as a state (not a time): no trial starts after it, and the trial running at the stop
    # (for Ctrl-C, sent once a bisection trial has been printed: the next one is building) is the last one
    assert record["trialsAtStop"] == len(record["trials"]), "no trial starts after the stop"
    if source == "ctrl_c":
        assert record["stoppedDuringTrial"] == last["trial"], record["stoppedDuringTrial"]
    else:
        assert record["stoppedDuringTrial"] in (None, last["trial"])
    if last["trial"] == record["stoppedDuringTrial"] and last["outcome"] == "cancelled":
        assert not last["stillFails"], "a cancelled trial is no verdict"
    if record["minimal"] is not None:
        assert (folder / "minimal.onnx").is_file()
        assert record["minimal"]["nodes"] == min(t["nodes"] for t in record["trials"] if t["stillFails"])
    runs = tmp_path / ".trtls" / "runs"
    for t in record["trials"]:
        assert (runs / t["buildId"] / "summary.json").is_file(), "every trial is a build with its evidence"
        assert not (runs / t["buildId"] / "running.json").exists()
    assert not list(tmp_path.rglob("*.trtls-tmp-*")) and not (tmp_path / "build").exists()


TEARDOWN_WITNESS = """
import atexit, sys
class Witness:  # a global of __main__: only the interpreter's teardown collects it
    def __del__(self):
        sys.stdout.write("WITNESS teardown ran\\n")
        sys.stdout.flush()
witness = Witness()
atexit.register(lambda: print("WITNESS atexit ran", flush=True))
from trtls.cli.main import main  # as the console script and `python -m trtls` do
sys.argv = ["trtls", "reduce", sys.argv[1], "--engine", "demo", "--json"]
sys.exit(main())
"""


def test_the_reduce_command_ends_once_its_record_is_written_without_tearing_down_its_modules(workspace: Path) -> None:
    """The stop's margin over a build's was the interpreter unloading ONNX Runtime, onnx, Polygraphy and numpy
    (docs/performance.md): the command ends with os._exit once the record is durable — atexit hooks run, the output is
    complete, the exit code is the command's, and the teardown does not happen."""
    proc = subprocess.run(
        [sys.executable, "-c", TEARDOWN_WITNESS, str(workspace)], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 1, proc.stderr[-2000:]  # the engine builds: nothing to reduce
    lines = proc.stdout.splitlines()
    record = json.loads(next(ln for ln in lines if ln.startswith("{")))
    assert record["outcome"] == "not_reproduced"
    folder = workspace / ".trtls" / "reduce" / record["id"]
    assert json.loads((folder / "result.json").read_text()) == json.loads(json.dumps(record))
    assert "WITNESS atexit ran" in lines
    assert "WITNESS teardown ran" not in lines, "the interpreter's teardown ran after the record was written"
