"""Time left with no history of this engine, from similar builds of the project's other engines
(trtls.builds.supervisor.similar_builds), on real TensorRT-RTX builds of the quickstart's models: `demo` built for
real records its model's facts; a second engine over a similar model (demo's graph with 14 norms a segment instead of
16) is estimated from it and says so; a dissimilar one (one segment of 4 norms) gets "no estimate"."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import onnx
import pytest

from trtls.builds.supervisor.history import History
from trtls.builds.supervisor.similar_builds import BAND, estimate_from_similar, similar
from trtls.builds.supervisor.supervisor import Build
from trtls.core import build_view
from trtls.core.events import parse_event

PROFILE = '[[engines.{name}.profiles]]\ninput = "input"\nmin = [1, 3, 32, 32]\nopt = [4, 3, 32, 32]\n'
PROFILE += "max = [8, 3, 32, 32]\n"


def make_model(ws: Path, name: str, segments: int, norms: int) -> None:
    spec = importlib.util.spec_from_file_location("quickstart_models", ws / "make_models.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    onnx.save(module.build_model(name, segments, norms), str(ws / "models" / f"{name}.onnx"))
    recipe = ws / "trtls.toml"
    engine = f'\n[engines.{name}]\nonnx = "models/{name}.onnx"\noutput = "build/{name}.engine"\n'
    recipe.write_text(recipe.read_text() + engine + PROFILE.format(name=name))


def build(ws: Path, engine: str) -> list[Any]:
    run = subprocess.run(
        [sys.executable, "-m", "trtls", "build", str(ws), "--engine", engine, "--json", "--no-store"],
        capture_output=True, text=True, env={**os.environ, "TRTLS_STORE": "off"}, timeout=900,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    lines = [json.loads(line) for line in run.stdout.splitlines()]
    events = [r for r in lines if "t_ns" in r and r.get("type") not in (None, "summary", "error")]
    return [parse_event(json.dumps(r)) for r in events]


def _longest_stretch_with_a_phase_open(evs: list[Any]) -> tuple[int, int]:
    """(start, end) of the longest time during which at least one phase of the recording is open."""
    marks = sorted(
        (e.t_ns, 1 if e.type == "phase_start" else -1) for e in evs if e.type in ("phase_start", "phase_finish")
    )
    stretches, depth, opened = [], 0, 0
    for t, delta in marks:
        if depth == 0 and delta > 0:
            opened = t
        depth += delta
        if depth == 0:
            stretches.append((opened, t))
    return max(stretches, key=lambda s: s[1] - s[0])


def halfway_message(ws: Path, engine: str, evs: list[Any], monkeypatch: pytest.MonkeyPatch) -> str:
    """The progress message of a build of `engine` at half its length, its events replayed into a Build of `ws`."""
    t0 = evs[0].t_ns
    # halfway through the longest stretch with a phase open, not through the worker's run nor the builder's call: on
    # a loaded machine a small model's worker spends most of its run importing TensorRT, then writing and hashing the
    # engine, and after its last phase the builder still serializes (~25 % of a tiny model's call here) — halfway
    # through either found no phase running ("starting worker": CI beside a burner, twice)
    start, end = _longest_stretch_with_a_phase_open(evs)
    now = start + (end - start) // 2
    monkeypatch.setattr(time, "monotonic_ns", lambda: now)
    job = {"onnx": str(ws / "models" / f"{engine}.onnx"), "output": str(ws / "build" / f"{engine}.engine")}
    b = Build(f"{engine}-replayed", engine, ws / "trtls.toml", job, 5.0, ["w"])
    b.state.t_start_ns = t0  # the replayed build started when its recording did
    for ev in evs:
        if ev.t_ns > now:
            break
        b.fold(ev)
    return build_view.progress_message(b.state, b.time_left)


def test_a_new_engine_is_estimated_from_similar_builds_and_a_dissimilar_one_is_not(
    tmp_path: Path, workspace: Path, quickstart_models: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    others = tmp_path / "others"  # the new engines' own builds, recorded elsewhere: here they have no history
    shutil.copytree(workspace, others)
    for ws in (workspace, others):
        make_model(ws, "demo_b", 2, 14)
        make_model(ws, "tiny", 1, 4)
    build(workspace, "demo")
    history = History(workspace / ".trtls" / "history.json")
    [(facts, durations)] = history.others("")
    assert facts["builder"].startswith("tensorrt_rtx ") and facts["profiles"] == 1 and facts["layers"] > 0
    assert facts["onnxBytes"] == (workspace / "models" / "demo.onnx").stat().st_size and len(durations) == 1

    similar_message = halfway_message(workspace, "demo_b", build(others, "demo_b"), monkeypatch)
    assert similar_message.endswith(", from 1 similar build"), similar_message
    assert " left, " in similar_message
    dissimilar_message = halfway_message(workspace, "tiny", build(others, "tiny"), monkeypatch)
    assert dissimilar_message.endswith(" · no estimate"), dissimilar_message


def test_similar_means_same_builder_device_and_profiles_and_size_within_twice() -> None:
    mine = {"builder": "tensorrt_rtx 1.7", "device": None, "onnxBytes": 35_000, "layers": 170, "profiles": 1}
    recorded = [
        ({**mine, "layers": 85}, [4.0, 6.0]),  # half the layers: similar, its 5 s scaled to 10 s
        ({**mine, "profiles": 48}, [30.0]),
        ({**mine, "builder": "tensorrt_rtx 1.8"}, [3.0]),
        ({**mine, "device": "NVIDIA H200"}, [3.0]),
        ({**mine, "onnxBytes": 80_000}, [3.0]),
        ({**mine, "layers": 400}, [3.0]),
    ]
    assert similar(mine, recorded) == [(10.0, 2)]
    point, low, high, n = estimate_from_similar([(10.0, 2)], 4.0) or (0, 0, 0, 0)
    assert (point, low, high, n) == (6.0, 1.0, 10.0 * BAND[1] - 4.0, 2)
    assert estimate_from_similar([(10.0, 2)], 10.0 * BAND[1] + 1) is None  # past them all: they no longer say
    assert estimate_from_similar([], 0.0) is None


def test_time_left_says_it_is_from_similar_builds() -> None:
    from trtls.core.display import time_left_text

    assert time_left_text(40, 25, 90, similar=3) == "~40 s left, 25 s – 1 min 30 s, from 3 similar builds"
    assert time_left_text(4.2, 3.1, 5.7, similar=1) == "~4.2 s left, 3.1–5.7 s, from 1 similar build"
    assert time_left_text(None, None, None, similar=2) == "no estimate"
