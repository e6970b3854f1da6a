"""Real TensorRT-RTX builds of the shapes of model users bring (samples/models): two dynamic inputs in
every profile and several profiles, dynamic height/width, an int64 input, weights in external data."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.builds.helpers import loaded
from trtls.builds.supervisor.supervisor import Supervisor
from trtls.core.summary_record import Summary


async def _build(ws: Path, engine: str, edit: dict[str, str] | None = None) -> Summary:
    build = Supervisor().start(loaded(ws, edit), engine)
    summary = await build.wait()
    assert summary.outcome == "built", summary.error
    assert (ws / "build" / f"{engine}.engine").stat().st_size > 0
    return summary


async def test_encoder_with_two_dynamic_inputs_and_two_profiles(models_ws: Path) -> None:
    """The issue's failing case: input_ids + attention_mask [batch, seq]; each recipe profile gives both."""
    summary = await _build(models_ws, "encoder")
    held = summary.optimizationProfiles
    assert [p["index"] for p in held] == [0, 1], "one TensorRT profile per recipe profile"
    for profile in held:
        assert set(profile["inputs"]) == {"input_ids", "attention_mask"}, "every dynamic input in every profile"
    assert held[0]["inputs"]["input_ids"] == {"min": [1, 1], "opt": [1, 64], "max": [4, 128]}
    assert held[1]["inputs"]["attention_mask"] == {"min": [1, 128], "opt": [8, 256], "max": [16, 512]}


@pytest.mark.parametrize("engine", ["detector", "tokens", "external"])
async def test_single_input_models_build(models_ws: Path, engine: str) -> None:
    summary = await _build(models_ws, engine)
    assert len(summary.optimizationProfiles) == 1


async def test_three_profiles_for_a_detector(models_ws: Path) -> None:
    """Several profiles over dynamic height and width, written as sub-tables."""
    extra = """
[[engines.detector.profiles]]
[engines.detector.profiles.inputs.images]
min = [1, 3, 640, 640]
opt = [1, 3, 960, 960]
max = [1, 3, 1280, 1280]

[[engines.detector.profiles]]
inputs.images = { min = [4, 3, 32, 32], opt = [8, 3, 64, 64], max = [8, 3, 128, 128] }
"""
    summary = await _build(models_ws, "detector", {"max = [2, 3, 640, 640]\n": "max = [2, 3, 640, 640]\n" + extra})
    held = summary.optimizationProfiles
    assert [p["inputs"]["images"]["max"] for p in held] == [[2, 3, 640, 640], [1, 3, 1280, 1280], [8, 3, 128, 128]]
