"""Capability before any build (issue 33): TensorRT's own parser and builder asked, in a child process, whether they
take an engine's ONNX. Real models nobody on this project wrote: silero-vad's If-based export (the parser takes it,
the builder refuses it with the internal error its build ends on), ONNX Runtime's own scikit-learn sample
(`logreg_iris.onnx`: LinearClassifier, Normalizer, ZipMap, which the parser has no importer for), the quickstart
`demo`, which builds and is not flagged, and osam's NonMaxSuppression model, which both queries take and whose trial
build — the engine's build stopped at its first tactic timing — fails as its build does."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
from pathlib import Path

import onnxruntime
import pytest

from tests.onnx_files.third_party import fetch_all
from trtls.builds.supervisor.capability_client import ask, capability_request
from trtls.core.capability import capability_findings, capability_summary
from trtls.onnx_files.profile_checks import check_recipe

IRIS = Path(onnxruntime.__file__).parent / "datasets" / "logreg_iris.onnx"  # shipped in the onnxruntime wheel
VAD_RECIPE = """\
[engines.vad]
onnx = "vad.onnx"
output = "build/vad.engine"

[[engines.vad.profiles]]
inputs.input = { min = [1, 512], opt = [1, 512], max = [4, 512] }
inputs.state = { min = [2, 1, 128], opt = [2, 1, 128], max = [2, 4, 128] }

[engines.iris]
onnx = "iris.onnx"
output = "build/iris.engine"
"""


@pytest.fixture
def refused_ws(tmp_path: Path) -> Path:
    shutil.copyfile(fetch_all()["silero_vad_if"], tmp_path / "vad.onnx")
    shutil.copyfile(IRIS, tmp_path / "iris.onnx")
    (tmp_path / "trtls.toml").write_text(VAD_RECIPE)
    return tmp_path


NMS_RECIPE = """\
[engines.nms]
onnx = "nms.onnx"
output = "build/nms.engine"

[[engines.nms.profiles]]
inputs.boxes = { min = [1, 1, 4], opt = [1, 100, 4], max = [4, 1000, 4] }
inputs.scores = { min = [1, 1, 1], opt = [1, 3, 100], max = [4, 80, 1000] }
"""


def _check(folder: Path, *extra: str) -> tuple[int, dict]:
    run = subprocess.run(
        [sys.executable, "-m", "trtls", "check", str(folder), "--format", "json", *extra],
        capture_output=True,
        text=True,
    )
    return run.returncode, json.loads(run.stdout)


def test_check_capability_flags_both_models_before_any_build(refused_ws: Path) -> None:
    code, plain = _check(refused_ws)
    assert code == 0 and plain["findings"] == [], "the recipe itself is right: only TensorRT can say no"
    code, report = _check(refused_ws, "--capability")
    assert code == 2
    by_engine: dict[str, list[dict]] = {}
    for f in report["findings"]:
        by_engine.setdefault(f["path"][1], []).append(f)
    (vad,) = by_engine["vad"]
    assert vad["code"] == "TRT131" and vad["path"] == ["engines", "vad", "onnx"] and vad["line"] == 2
    assert "graphScope.cpp" in vad["message"] and "is_network_supported" in vad["message"]
    iris = by_engine["iris"]
    assert [(f["code"], f["data"]["capability"]["node"]["op"]) for f in iris] == [
        ("TRT130", "LinearClassifier"),
        ("TRT130", "Normalizer"),
        ("TRT130", "ZipMap"),
    ]
    assert "node 2 'ZipMap' (ZipMap)" in iris[2]["message"] and "Plugin not found" in iris[2]["message"]
    assert report["capability"]["vad"]["parser"]["supported"] is True, "the parser alone takes the If export"
    assert not (refused_ws / "build").exists() and not (refused_ws / ".trtls" / "runs").exists(), "no build ran"


def test_check_capability_text_uses_the_same_words(refused_ws: Path) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "trtls", "check", str(refused_ws), "--capability"], capture_output=True, text=True
    )
    _, report = _check(refused_ws, "--capability")
    for f in report["findings"]:
        assert f"{f['code']} error: {f['message']}" in run.stdout


def test_a_model_that_builds_is_not_flagged(workspace: Path) -> None:
    code, report = _check(workspace, "--capability")
    assert code == 0 and report["findings"] == []
    assert {e: a["status"] for e, a in report["capability"].items()} == {"demo": "supported", "large": "supported"}
    assert "takes the network" in capability_summary(report["capability"]["demo"])


async def test_the_child_is_awaited_off_the_loop_and_a_stuck_one_is_ended(workspace: Path) -> None:
    loaded = check_recipe(workspace / "trtls.toml")
    assert loaded.recipe is not None
    request = capability_request(loaded, loaded.recipe.engines["demo"])
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.005)
            ticks += 1

    ticker = asyncio.create_task(tick())
    answer = await ask(request)
    ticker.cancel()
    assert answer["status"] == "supported" and ticks > 0, "the loop ran while TensorRT answered"
    stuck = await ask(request, timeout_s=0.001)  # no Python starts, imports TensorRT and parses in a millisecond
    assert stuck["status"] == "not_checked" and stuck["child"] == "timeout"
    (finding,) = capability_findings("demo", stuck)
    assert finding.code == "TRT132" and "did not answer within" in finding.message


def test_an_nms_model_both_queries_take_is_flagged_by_the_trial_build_before_any_build(tmp_path: Path) -> None:
    """osam 0.8.1's `non_maximum_suppression.onnx` (one NonMaxSuppression node, what osam runs after its YOLO-World
    detector), as TensorRT-RTX 1.7.1 answers it here: the parser takes the node and `is_network_supported` the network
    with the engine's profile, but the NMS layer TensorRT makes of it has no runner (tacticSupply.cpp), whatever the
    compute capabilities. The trial build — the engine's own build, stopped by its progress monitor at its first
    tactic timing — fails before that timing with the error the build ends on: TRT133 before any build, and the
    build's evidence says the same of the build itself."""
    shutil.copyfile(fetch_all()["osam_nms"], tmp_path / "nms.onnx")
    (tmp_path / "trtls.toml").write_text(NMS_RECIPE)
    code, report = _check(tmp_path, "--capability")
    answer = report["capability"]["nms"]
    assert answer["module"].startswith("tensorrt_rtx 1.7.1")
    assert answer["parser"]["supported"] is True and answer["builder"]["status"] == "supported", "both queries take it"
    assert answer["trial"]["status"] == "refused" and answer["status"] == "refused"
    (finding,) = report["findings"]
    assert code == 2 and finding["code"] == "TRT133" and finding["path"] == ["engines", "nms", "onnx"]
    assert "node_of_selected_indices_2 has no runners that implement it" in finding["message"]
    assert "stopped at its first tactic timing" in finding["message"]
    assert not (tmp_path / ".trtls" / "runs").exists(), "no build ran"
    build = subprocess.run([sys.executable, "-m", "trtls", "build", str(tmp_path)], capture_output=True, text=True)
    said = build.stdout + build.stderr
    assert build.returncode != 0 and not (tmp_path / "build" / "nms.engine").exists()
    assert "tacticSupply.cpp" in said and "node_of_selected_indices_2 has no runners that implement it" in said
    assert "no implementation at layer node_of_selected_indices_2" in said and "not for lack of memory" in said
    (summary_path,) = (tmp_path / ".trtls" / "runs").glob("nms-*/summary.json")
    summary = json.loads(summary_path.read_text())
    assert "has no runners" in summary["error"]
    recorded = summary["capability"]
    assert recorded["builder"]["status"] == "supported", "asked again after the failed build, the builder says yes"
    assert recorded["status"] == "refused" and recorded["trial"]["asked"].startswith("the build itself, which failed")
    (again,) = capability_findings("nms", recorded)
    assert again.code == "TRT133" and again.message.startswith("the build by tensorrt_rtx 1.7.1")


def test_the_trial_reaches_the_first_timing_of_a_model_that_builds_and_says_when_its_budget_ran_out(
    workspace: Path,
) -> None:
    """The quickstart `demo` builds: its trial reaches 'Timing tactics' and is stopped there (no engine is built);
    with a budget no builder can meet, the trial is `not_checked`, said as TRT132 (information), never a refusal."""
    from trtls.builds.supervisor.capability_client import ask_blocking

    loaded = check_recipe(workspace / "trtls.toml")
    assert loaded.recipe is not None
    request = capability_request(loaded, loaded.recipe.engines["demo"])
    answer = ask_blocking(request)
    assert answer["trial"]["status"] == "supported" and answer["trial"]["reason"] == "it reached 'Timing tactics'"
    assert "a trial build reaches its first timing" in capability_summary(answer)
    assert not (workspace / "build").exists(), "the trial writes no engine"
    short = ask_blocking({**request, "trial_budget_s": 1e-9})
    assert short["status"] == "supported" and short["trial"]["status"] == "not_checked"
    (finding,) = capability_findings("demo", short)
    assert finding.code == "TRT132" and finding.severity.value == "information"
    assert "did not reach its first timing within 1e-09 s" in finding.message
