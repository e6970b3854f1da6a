"""The quickstart sample's own facts for recipes written by tests and benchmarks (a plain module: benchmarks import it
without pytest)."""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

QUICKSTART = Path(__file__).resolve().parents[1] / "samples" / "quickstart"


@functools.cache
def _make_models() -> ModuleType:
    spec = importlib.util.spec_from_file_location("quickstart_make_models", QUICKSTART / "make_models.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def quickstart_profiles(model: str) -> str:
    """`profiles = [...]` for a recipe of one's own that builds a quickstart model: the quickstart recipe's profiles
    (with one profile, `large` would build in seconds instead of the half-minute a Stop test needs)."""
    key: str = _make_models().profiles_key(model)
    return key


def quickstart_profile_list(model: str) -> list[dict[str, Any]]:
    """The same profiles as data ({input, min, opt, max} each): for a script that calls TensorRT itself."""
    profiles: list[dict[str, Any]] = _make_models().recipe_profiles(model)
    return profiles
