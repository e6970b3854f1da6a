"""Golden outputs: reference outputs recorded elsewhere (another framework, another machine), with their provenance.

The file is Polygraphy's `RunResults` JSON — what `polygraphy run --save-outputs` writes and `--load-outputs`
reads — loaded through Polygraphy itself (`RunResults.load`, which decodes arrays with `allow_pickle=False`), so
trtls adds no format of its own. The route says where the outputs came from:

    golden_outputs = { path = "golden/tiny.json", framework = "torch", framework_version = "2.5.1",
                       inputs_sha256 = "<sha256 of reference_inputs>" }

`inputs_sha256` ties the outputs to the inputs they were computed from: gate 4 compares only when it equals the
sha256 of the route's `reference_inputs` file (outputs of other inputs prove nothing). Iteration i of the first
runner is the output of reference feed i.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np


class GoldenError(Exception):
    pass


@dataclass
class GoldenOutputs:
    runner: str
    outputs: list[dict[str, np.ndarray]]


def quiet_polygraphy() -> None:
    """Polygraphy logs to stdout (each load/save and comparison, and a note about colours), which would land in
    `trtls gates --format json`: trtls reports the results itself, so only its critical messages stay."""
    from polygraphy.logger import G_LOGGER

    G_LOGGER.colors = False
    G_LOGGER.module_severity = G_LOGGER.CRITICAL


def load_golden(path: Path) -> GoldenOutputs:
    """The first runner's outputs from a Polygraphy RunResults JSON file."""
    try:
        from polygraphy.comparator import RunResults
    except ImportError as exc:  # pragma: no cover - polygraphy is in trtls[gates]
        raise GoldenError("golden outputs need polygraphy (pip install 'trtls[gates]')") from exc
    quiet_polygraphy()
    try:
        results = RunResults.load(str(path))
    except Exception as exc:  # polygraphy raises its own PolygraphyException on bad input
        raise GoldenError(f"{path.name} is not a Polygraphy RunResults file: {exc}") from None
    if not results.lst:
        raise GoldenError(f"{path.name} holds no runner results")
    runner, iterations = results.lst[0]
    return GoldenOutputs(str(runner), [{k: np.asarray(v) for k, v in it.items()} for it in iterations])


def save_golden(path: Path, runner: str, outputs: list[dict[str, np.ndarray]]) -> None:
    """Write outputs as Polygraphy RunResults JSON (what `polygraphy run --save-outputs` produces)."""
    from polygraphy.comparator import IterationResult, RunResults

    quiet_polygraphy()
    results = RunResults()
    results.append((runner, [IterationResult(dict(o), runner_name=runner) for o in outputs]))
    results.save(str(path))
