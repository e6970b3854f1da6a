"""The divergence search for an engine or a route, with its inputs, tolerances and evidence
(`.trtls/reduce/<id>/divergence.json`, written atomically). Plain Python over `diverge`; the CLI and the language
server call `run_divergence`."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from trtls.builds.roots import state_root
from trtls.builds.supervisor.job import new_build_id, state_dir
from trtls.core.cancel import CancelToken
from trtls.core.recipe import LoadedRecipe
from trtls.core.route import RouteModel
from trtls.core.triage_records import DIVERGENCE_NAME, DivergenceResult
from trtls.fs import Kind, atomic_write_text, ensure_folder
from trtls.fs.models import load_npz, load_onnx
from trtls.triage.diverge import RANGE_RTOL, RULE, find_divergence, random_feed, standard_json


class DivergenceUnavailable(ValueError):
    """Nothing to compare (no precision conversion) or an input that cannot be used: a located, plain reason."""


def load_feed(path: Path, model: Any) -> dict[str, np.ndarray]:
    """The arrays of an inputs file (`np.savez`: one array per model input, by name), checked against what `model`
    (an onnx ModelProto, its inputs enough) takes — each input given, nothing else, its dtype and rank, its fixed
    dims — so that a wrong file is said as such (DivergenceUnavailable), not as ONNX Runtime's error mid-search."""
    import zipfile

    from trtls.fs.models import NotAnArchive
    from trtls.triage.probe import model_inputs

    if not path.is_file():
        raise DivergenceUnavailable(f"the inputs file {path} is not a file")
    npz = "a NumPy .npz of arrays by input name (np.savez(path, name=array, …))"
    try:
        feed = load_npz(path)  # a regular file only, never unpickled: an inputs file is arrays only
    except NotAnArchive as exc:  # np.load would read it as a pickle or one .npy array
        raise DivergenceUnavailable(f"the inputs file {path} is not {npz}: {exc}") from None
    except OSError as exc:  # a FIFO or a device swapped in after the check above: the door's reason
        raise DivergenceUnavailable(f"the inputs file {path} cannot be read: {exc.strerror or exc}") from None
    except (ValueError, EOFError, zipfile.BadZipFile) as exc:
        raise DivergenceUnavailable(f"the inputs file {path} is not {npz}: {type(exc).__name__}: {exc}") from None
    if odd := [k for k, v in feed.items() if not isinstance(v, np.ndarray)]:  # a member that is no .npy array
        raise DivergenceUnavailable(f"the inputs file {path} is not {npz}: {', '.join(odd)} is not an array")
    wanted = {i.name: i for i in model_inputs(model)}
    ranked = {v.name for v in model.graph.input if v.type.tensor_type.HasField("shape")}  # else: any rank
    problems = [f"no array for input {n}" for n in wanted if n not in feed]
    problems += [f"an array {n!r} the model does not take" for n in feed if n not in wanted]
    for name, spec in wanted.items():
        got = feed.get(name)
        if got is None:
            continue
        fixed = [d if isinstance(d, int) and d > 0 else None for d in spec.shape]
        if got.dtype != spec.dtype:
            problems.append(f"{name} is {got.dtype}, the model takes {spec.dtype}")
        elif name in ranked and (
            got.ndim != len(fixed) or any(d not in (None, g) for d, g in zip(fixed, got.shape, strict=True))
        ):
            problems.append(f"{name} has shape {list(got.shape)}, the model takes {[d or '?' for d in spec.shape]}")
        elif got.size == 0:  # no element: every tensor after it compared on nothing would read "within tolerance"
            problems.append(f"{name} is empty (shape {list(got.shape)}): nothing would be compared")
        elif got.dtype.kind in "fc" and (bad := int(np.count_nonzero(~np.isfinite(got)))):
            problems.append(
                f"{name} holds {bad} inf/NaN values: no error is measured where the reference is not finite"
            )
    if problems:
        takes = ", ".join(f"{n} ({s.dtype}, {[d or '?' for d in s.shape]})" for n, s in wanted.items()) or "none"
        raise DivergenceUnavailable(f"the inputs file {path} does not fit the model ({takes}): {'; '.join(problems)}")
    return feed


def _route_setup(
    loaded: LoadedRecipe, route: str, input_set: str | None = None
) -> tuple[RouteModel, Path | None, dict[str, tuple[float, float]]]:
    """(the route's model, its inputs file or None, its output tolerances)."""
    from trtls.core.route import route_model

    model = route_model(loaded, route)
    if model.engine is None and model.precision is None:
        raise DivergenceUnavailable(
            f"route '{route}' deploys its ONNX as exported (no [routes.{route}.precision] convert): there is no "
            "converted model to compare layer by layer"
        )
    sets = model.input_sets  # the first reference input set, or the one named
    if input_set is not None and input_set not in sets:
        raise DivergenceUnavailable(
            f"route '{route}' has no reference input set {input_set!r} (its sets: {', '.join(sets) or 'none'})"
        )
    rel = sets[input_set] if input_set is not None else next(iter(sets.values()), None)
    inputs = loaded.resolve(rel) if rel else None
    tolerances = {name: (t.atol, t.rtol) for name, t in model.tolerances.items()}
    return model, inputs, tolerances


@dataclass
class DivergenceSetup:
    """What a search compares, checked before it starts: the engine (None for a route that deploys its ONNX), its
    conversion spec, the reference ONNX, the route's tolerances and the inputs (a file, or None for seeded random
    inputs). Raises nothing once built."""

    engine: str | None
    route: str | None
    spec: dict[str, Any]
    reference: Path
    tolerances: dict[str, tuple[float, float]]
    inputs: Path | None
    threshold: float
    profiles: list[dict[str, Any]]


def setup_divergence(
    loaded: LoadedRecipe,
    *,
    engine: str | None = None,
    route: str | None = None,
    inputs: Path | None = None,
    rtol: float | None = None,
    input_set: str | None = None,
) -> DivergenceSetup:
    """Check that there is something to compare (DivergenceUnavailable, KeyError for an unknown name). A route's
    inputs are its first reference input set, or `input_set` when it names one (`inputs` overrides both)."""
    tolerances: dict[str, tuple[float, float]] = {}
    if route is not None:
        model, route_inputs, tolerances = _route_setup(loaded, route, input_set)
        inputs = inputs or route_inputs
        engine = model.engine
        if engine is None:  # a route that deploys its ONNX, converted by [routes.X.precision]
            assert model.precision is not None and model.onnx is not None  # _route_setup, the route model
            spec, reference = model.precision.model_dump(), loaded.resolve(model.onnx)
            threshold = rtol if rtol is not None else RANGE_RTOL[spec["convert"]]
            return DivergenceSetup(None, route, spec, reference, tolerances, inputs, threshold, [])
    if engine is None:
        raise DivergenceUnavailable("give one of engine or route")
    eng = loaded.engine(engine)
    spec = eng.precision.model_dump()
    if not spec.get("convert"):
        raise DivergenceUnavailable(
            f"engine '{engine}' has no [precision] convert: its ONNX is built as it is, there is no converted model "
            "to compare layer by layer"
        )
    threshold = rtol if rtol is not None else RANGE_RTOL[spec["convert"]]
    reference = loaded.resolve(eng.onnx)
    return DivergenceSetup(engine, route, spec, reference, tolerances, inputs, threshold, eng.job_profiles())


def run_divergence(
    loaded: LoadedRecipe,
    *,
    engine: str | None = None,
    route: str | None = None,
    inputs: Path | None = None,
    rtol: float | None = None,
    fix: bool = False,
    token: CancelToken | None = None,
    tensorrt: bool = False,
    rid: str | None = None,
    report: Callable[[str], Any] | None = None,
    setup: DivergenceSetup | None = None,
    input_set: str | None = None,
) -> DivergenceResult:
    """The search, its evidence written; `report(text)` is told each step (from this thread); `tensorrt` adds the
    TensorRT engine's layer-wise comparison (`trt_layers`), or why it could not run here."""

    from trtls.builds.precision import PrecisionCancelled, run_precision_step

    s = setup or setup_divergence(loaded, engine=engine, route=route, inputs=inputs, rtol=rtol, input_set=input_set)
    tell = report or (lambda text: None)
    token = token or CancelToken()
    cache = state_dir(loaded.path) / "precision"

    def convert(spec: dict[str, Any]) -> Path | None:
        excluded = spec.get("exclude_nodes") or []
        tell(f"converting to {spec['convert']}" + (f" without {', '.join(excluded)}" if excluded else ""))
        try:
            return run_precision_step(s.reference, spec, cache, token).onnx
        except PrecisionCancelled:  # a stop (Ctrl-C, --timeout, the editor's) killed the conversion's child
            return None

    reference = load_onnx(s.reference, external_data=False)  # its inputs: the feed's names and shapes
    if s.inputs is not None:
        feed = load_feed(s.inputs, reference)
        inputs_text = str(s.inputs)
    else:
        feed = random_feed(reference, s.profiles)
        inputs_text = "seeded random inputs at the first profile's opt shapes (no reference inputs given)"
    found = find_divergence(
        s.reference, convert, s.spec, feed, s.threshold, s.tolerances, fix, stop=lambda: token.is_set, report=tell
    )
    rid = rid or new_build_id(f"diverge-{s.engine or s.route}")
    folder = state_dir(loaded.path) / "reduce" / rid
    first = found.rounds[0]["firstDiverging"] if found.rounds else None
    record = {
        "kind": "divergence",
        "id": rid,
        "engine": s.engine,
        "route": s.route,
        "precisionTable": f"engines.{s.engine}.precision" if s.engine else f"routes.{s.route}.precision",
        "precision": s.spec["convert"],
        "reference": str(s.reference),
        "inputs": inputs_text,
        "rule": RULE,
        "rangeRtol": s.threshold,
        "outputTolerances": {k: {"atol": a, "rtol": r} for k, (a, r) in s.tolerances.items()},
        "firstDiverging": first,
        "proposal": None if first is None else {"precision.exclude_nodes": [first["node"]]},
        "fixAsked": fix,
        "fixed": found.fixed,
        "excludeNodes": found.excluded,
        "widened": found.widened,  # excluded because excluding the node below them alone did not help
        "cancelled": token.is_set,
        "cancelSource": token.source,  # ctrl_c, ci_timeout (--timeout), ide_stop, api: who stopped it, as for a build
        "rounds": found.rounds,
        "ranHere": "onnxruntime (CPU) for both models",
        "parityRerun": None,  # with --route --fix: gate 4 run again with the fix (triage/parity_rerun.py)
    }
    if s.route is not None and fix and not token.is_set:
        record["parityRerun"] = _parity_rerun(loaded, s, found, folder, token, tell)
    if tensorrt and s.engine is not None and not token.is_set and found.rounds:  # an ONNX route has no engine
        from trtls.triage.trt_layers_run import tensorrt_layers

        tell("comparing the TensorRT engine's layers")
        converted = Path(found.rounds[-1]["convertedModel"])
        compared = tensorrt_layers(s.reference, converted, feed, folder, token, s.threshold, s.tolerances)
        record["tensorrt"] = compared.record()
    root = state_root(folder)  # the recipe's folder: a `.trtls` swapped for a symlink is refused at the write
    ensure_folder(folder, within=root)
    record = standard_json(record)  # no `Infinity`/`NaN` (an fp16 overflow): null, and the tensor says `overflow`
    text = json.dumps(record, indent=2, allow_nan=False)
    atomic_write_text(folder / DIVERGENCE_NAME, text, kind=Kind.evidence, within=root)
    return DivergenceResult.written({**record, "folder": str(folder)})


def _parity_rerun(
    loaded: LoadedRecipe, s: DivergenceSetup, found: Any, folder: Path, token: CancelToken, tell: Callable[[str], Any]
) -> dict[str, Any]:
    """Gate 4 on the route again, with the nodes the search added to exclude_nodes (`parity_rerun`)."""
    from trtls.triage.parity_rerun import rerun_parity

    if not found.fixed or not found.rounds:
        return {"gates": [4], "status": "not_run", "reason": "the search found no conversion whose outputs pass"}
    already = set(s.spec.get("exclude_nodes") or [])
    added = [n for n in found.excluded if n not in already]
    if not added:
        return {"gates": [4], "status": "not_run", "reason": "nothing was excluded: the conversion already passes"}
    assert s.route is not None
    tell(f"gate 4 on route {s.route} with exclude_nodes += {added}")
    converted = Path(found.rounds[-1]["convertedModel"])
    first = Path(found.rounds[0]["convertedModel"])  # the conversion as the recipe reads now
    return rerun_parity(loaded, s.route, s.engine, added, converted, folder, token, unfixed=first)
