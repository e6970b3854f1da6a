"""The quickstart sample's own facts for recipes written by tests, benchmarks and CI (standard library only: the bare
TensorRT script of the benchmarks imports it, and must not pay for numpy or onnx in its timings)."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

QUICKSTART = Path(__file__).resolve().parents[1] / "samples" / "quickstart"


def quickstart_profile_list(model: str) -> list[dict[str, Any]]:
    """The optimization profiles the quickstart recipe builds `model` with ({input, min, opt, max} each). Another
    recipe building this model takes them from here: with one profile, `large` would be a 3-second build, not the
    half-minute Stop demo."""
    with (QUICKSTART / "trtls.toml").open("rb") as f:
        profiles: list[dict[str, Any]] = tomllib.load(f)["engines"][model]["profiles"]
    return profiles


def quickstart_profiles(model: str) -> str:
    """The same profiles as one `profiles = [...]` line, for an `[engines.X]` table of one's own recipe."""
    rows = ", ".join(
        f'{{ input = "{p["input"]}", min = {p["min"]}, opt = {p["opt"]}, max = {p["max"]} }}'
        for p in quickstart_profile_list(model)
    )
    return f"profiles = [{rows}]"
