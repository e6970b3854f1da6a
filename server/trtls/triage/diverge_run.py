"""The divergence search for an engine or a route, with its inputs, tolerances and evidence
(`.trtls/reduce/<id>/divergence.json`, written atomically). Plain Python over `diverge`; the CLI and the language
server call `run_divergence`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from trtls.builds.build import new_build_id, state_dir
from trtls.core.atomic import atomic_write_text
from trtls.core.cancel import CancelToken
from trtls.core.recipe import LoadedRecipe
from trtls.triage.diverge import RANGE_RTOL, RULE, find_divergence, random_feed, standard_json


class DivergenceUnavailable(ValueError):
    """Nothing to compare (no precision conversion) or an input that cannot be used: a located, plain reason."""


def _route_setup(loaded: LoadedRecipe, route: str) -> tuple[str, Path | None, dict[str, tuple[float, float]]]:
    from trtls.core.route import route_model

    model = route_model(loaded, route)
    if model.engine is None:
        raise DivergenceUnavailable(
            f"route '{route}' deploys its ONNX without an engine: there is no converted model to compare layer by layer"
        )
    inputs = loaded.resolve(model.reference_inputs) if model.reference_inputs else None
    tolerances = {name: (t.atol, t.rtol) for name, t in model.tolerances.items()}
    return model.engine, inputs, tolerances


def run_divergence(
    loaded: LoadedRecipe,
    *,
    engine: str | None = None,
    route: str | None = None,
    inputs: Path | None = None,
    rtol: float | None = None,
    fix: bool = False,
    token: CancelToken | None = None,
) -> dict[str, Any]:
    import onnx

    from trtls.builds.precision import PrecisionCancelled, run_precision_step

    tolerances: dict[str, tuple[float, float]] = {}
    if route is not None:
        engine, route_inputs, tolerances = _route_setup(loaded, route)
        inputs = inputs or route_inputs
    assert engine is not None
    eng = loaded.engine(engine)
    spec = eng.precision.model_dump()
    if not spec.get("convert"):
        raise DivergenceUnavailable(
            f"engine '{engine}' has no [precision] convert: its ONNX is built as it is, there is no converted model "
            "to compare layer by layer"
        )
    reference = loaded.resolve(eng.onnx)
    token = token or CancelToken()
    cache = state_dir(loaded.path) / "precision"

    def convert(s: dict[str, Any]) -> Path | None:
        try:
            return run_precision_step(reference, s, cache, token).onnx
        except PrecisionCancelled:  # a stop (Ctrl-C, --timeout, the editor's) killed the conversion's child
            return None

    if inputs is not None:
        with np.load(inputs) as data:
            feed = {k: data[k] for k in data.files}
        inputs_text = str(inputs)
    else:
        feed = random_feed(onnx.load(str(reference), load_external_data=False), eng.job_profiles())
        inputs_text = "seeded random inputs at the first profile's opt shapes (no reference inputs given)"
    threshold = rtol if rtol is not None else RANGE_RTOL[spec["convert"]]
    found = find_divergence(reference, convert, spec, feed, threshold, tolerances, fix, stop=lambda: token.is_set)
    rid = new_build_id(f"diverge-{engine}")
    folder = state_dir(loaded.path) / "reduce" / rid
    first = found.rounds[0]["firstDiverging"] if found.rounds else None
    record = {
        "kind": "divergence",
        "id": rid,
        "engine": engine,
        "route": route,
        "precision": spec["convert"],
        "reference": str(reference),
        "inputs": inputs_text,
        "rule": RULE,
        "rangeRtol": threshold,
        "outputTolerances": {k: {"atol": a, "rtol": r} for k, (a, r) in tolerances.items()},
        "firstDiverging": first,
        "proposal": None if first is None else {"precision.exclude_nodes": [first["node"]]},
        "fixAsked": fix,
        "fixed": found.fixed,
        "excludeNodes": found.excluded,
        "cancelled": token.is_set,
        "cancelSource": token.source,  # ctrl_c, ci_timeout (--timeout), … : who stopped it, as for a build
        "rounds": found.rounds,
        "ranHere": "onnxruntime (CPU) for both models; the TensorRT engine's layers are not compared here (no GPU)",
    }
    folder.mkdir(parents=True, exist_ok=True)
    record = standard_json(record)  # no `Infinity`/`NaN` (an fp16 overflow): null, and the tensor says `overflow`
    atomic_write_text(folder / "divergence.json", json.dumps(record, indent=2, allow_nan=False), within=folder)
    record["folder"] = str(folder)
    return record
