"""The quickstart's models build clean (issue 18): TensorRT gives no warning at all. `demo`, the first thing a new
user builds, is one compile unit; `large`, the Stop demo, reports progress through a half-minute build because
its recipe has 48 optimization profiles that TensorRT-RTX compiles one by one (make_models' docstring: the graph
cuts it replaced cost 112 "Was not able to infer kOPT value(s)" warnings)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import onnx
import pytest

from .helpers import run_build

WARNING = ("WARNING", "ERROR", "INTERNAL_ERROR")
CUT_OPS = ("Reshape", "Shape", "Cast")  # what a value-dependent graph cut is made of


async def _build(workspace: Path, engine: str) -> tuple[list[str], list[str]]:
    """A real build of `engine`: its TensorRT warnings and the names of the phases TensorRT started."""
    warnings: list[str] = []
    phases: list[str] = []

    def listen(_: object, ev: Any) -> None:  # ev: a worker event, None at the end
        if ev is not None and ev.type == "log" and ev.severity in WARNING:
            warnings.append(ev.msg)
        elif ev is not None and ev.type == "phase_start":
            phases.append(ev.name)

    _, build = await run_build(workspace, engine=engine)
    build.listeners.append(listen)
    summary = await build.wait()
    assert summary.outcome == "built", summary.error
    return warnings, phases


# demo before: 12 "Was not able to infer kOPT value(s)" (and, before e8fe95c, 24 "sign of a bug");
# large before: 112 of them, from its 56 graph cuts. `large` builds for ~30 s on 2 cores.
@pytest.mark.parametrize("engine,profiles", [("demo", 1), ("large", 48)])
async def test_the_quickstart_builds_with_no_tensorrt_warning(workspace: Path, engine: str, profiles: int) -> None:
    model = onnx.load(str(workspace / "models" / f"{engine}.onnx"))
    assert not [n.name for n in model.graph.node if n.op_type in CUT_OPS], "no graph cut"
    warnings, phases = await _build(workspace, engine)
    assert warnings == []
    # one compile per optimization profile, each a step apart: large's progress through its half-minute build
    assert phases.count("Determining refit engines") == profiles
