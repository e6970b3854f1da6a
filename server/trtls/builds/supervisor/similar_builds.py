"""Time left for an engine with no history of its own, from similar builds of the same project.

An engine built for the first time (a new model, a changed setting: a new buildConfigHash) has no phases or
durations of its own to go by. Other engines of the project's `.trtls/history.json` may: each config keeps its
model's facts (`model_facts`), and a config is similar when it was built
- by the same builder module and version, on the same device (none: the CPU-only builds of this host),
- with the same number of optimization profiles (TensorRT-RTX compiles the network once per profile: `large`'s 48
  profiles take ~10x `demo`'s one over a graph of about the same size),
- from a model within `SIZE_RATIO` of this one's, in ONNX bytes (the file and its external data) and in layers of
  the parsed network.
Each similar config's median build duration is scaled by the layer ratio (what the builder compiles is the graph;
the bytes are mostly weights, copied once), and the estimate is the median of those scaled durations minus the time
this build has run, with a wider interval than a build's own history: from the shortest scaled duration times
`BAND[0]` to the longest times `BAND[1]`. Settings other than these are not compared (an optimization level differs
between similar builds too: the interval is the price). How often it held is measured in docs/performance.md.
With no similar config: "no estimate".
"""

from __future__ import annotations

import os
import statistics
from pathlib import Path
from typing import Any

SIZE_RATIO = 2.0  # a similar model is at most twice as large, or half as large, in bytes and in layers
BAND = (0.5, 2.0)  # the interval: shortest scaled duration x 0.5 to the longest x 2, less the time run


def model_facts(build: Any) -> dict[str, Any] | None:
    """What makes builds comparable, from a build that reported `build_started`: {builder, device, onnxBytes,
    layers, profiles}; None before then (no network parsed yet)."""
    # core.build_records.BuildEnvironment and NetworkTyping (the worker's build_started)
    env, network = getattr(build, "environment", None), getattr(build, "network", None)
    layers = network.layers if network is not None else None
    if env is None or not env.module or not isinstance(layers, int) or layers <= 0:
        return None
    return {
        "builder": f"{env.module} {env.version}",
        "device": env.device_name,
        "onnxBytes": onnx_bytes(build.job.get("onnx")),
        "layers": layers,
        "profiles": len(getattr(build, "optimization_profiles", None) or []),
    }


def onnx_bytes(onnx: str | None) -> int | None:
    """The model's size: its file and the external data files beside it that name it (`model.onnx.data`, ...);
    None when it cannot be read (the facts are advice)."""
    if not onnx:
        return None
    path = Path(onnx)
    try:
        total = os.stat(path).st_size
        for near in os.scandir(path.parent):
            if near.name.startswith(path.name + ".") and near.is_file(follow_symlinks=False):
                total += near.stat(follow_symlinks=False).st_size
    except OSError:
        return None
    return total


def _within(a: Any, b: Any) -> bool:
    if not isinstance(a, (int, float)) or not isinstance(b, (int, float)) or a <= 0 or b <= 0:
        return False
    return 1 / SIZE_RATIO <= a / b <= SIZE_RATIO


def similar(facts: dict[str, Any], others: list[tuple[dict[str, Any], list[float]]]) -> list[tuple[float, int]]:
    """Of `others` (History.others: facts and durations), the similar ones as (median duration scaled to this
    model's layers, number of builds)."""
    out = []
    for theirs, durations in others:
        if theirs.get("builder") != facts["builder"] or theirs.get("device") != facts["device"]:
            continue
        if theirs.get("profiles") != facts["profiles"]:
            continue
        if not _within(facts.get("onnxBytes"), theirs.get("onnxBytes")):
            continue
        if not _within(facts["layers"], theirs.get("layers")):
            continue
        out.append((statistics.median(durations) * facts["layers"] / theirs["layers"], len(durations)))
    return out


def estimate_from_similar(scaled: list[tuple[float, int]], elapsed: float) -> tuple[float, float, float, int] | None:
    """(point, low, high, builds) for a build that has run `elapsed` s, from `similar`'s scaled durations; None
    with no similar build, or once this build has run past the longest of them times BAND[1] (they no longer
    describe it)."""
    if not scaled:
        return None
    durations = [d for d, _ in scaled]
    high = max(durations) * BAND[1] - elapsed
    if high <= 0:
        return None
    point = max(statistics.median(durations) - elapsed, 0.0)
    low = max(min(durations) * BAND[0] - elapsed, 0.0)
    return point, min(low, point), max(high, point), sum(n for _, n in scaled)
