"""`trtls reduce --diverge --candidate B.onnx [--reference A.onnx]`: where any two models with the same inputs part
ways — a model and the same model with one changed initializer, an optimizer's output, another export.

Both run through ONNX Runtime on the CPU with every tensor marked as an output (Polygraphy's `run A --onnxrt
--onnx-outputs mark all` and the same for B), on the same inputs; their tensors are compared by name in the
reference's topological order with the comparator and rule of the conversion search (`diverge.compare_values`), so
the first tensor out of tolerance and the node that made it are named the same way. Two models of one precision need
a tighter default than a conversion: `PAIR_RTOL` of a tensor's range (`--rtol` to change it). Nothing is converted:
no ModelOpt, no onnx_graphsurgeon; there is no `--fix` (no conversion to redo). Evidence:
`.trtls/reduce/<id>/divergence.json`, as for the conversion search.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from trtls.builds.roots import state_root
from trtls.builds.supervisor.job import new_build_id, state_dir
from trtls.core.cancel import CancelToken
from trtls.core.recipe import LoadedRecipe
from trtls.core.triage_records import DIVERGENCE_NAME, DivergenceResult
from trtls.fs import Kind, atomic_write_text, ensure_folder
from trtls.fs.models import load_onnx
from trtls.triage.diverge import RULE, compare, random_feed, standard_json
from trtls.triage.diverge_run import DivergenceUnavailable, load_feed

# float32 reorderings (another summation order, a fused kernel) move a tensor by ~1e-6 of its range; a changed weight
# or a different export, by far more than 1e-3
PAIR_RTOL = 1e-3


def _load(path: Path, what: str) -> Any:

    if not path.is_file():
        raise DivergenceUnavailable(f"the {what} model {path} is not a file")
    try:
        return load_onnx(path)  # external data from the model's own folder, as ONNX Runtime reads it
    except OSError as exc:  # a FIFO, a device, external data out of the folder: the door's reason, with the path
        raise DivergenceUnavailable(f"the {what} model {path} cannot be read: {exc.strerror or exc}") from None
    except Exception as exc:  # a truncated or foreign file: said with its path, never a traceback
        raise DivergenceUnavailable(f"the {what} model {path} cannot be read as ONNX: {exc}") from None


def _same_inputs(reference: Any, candidate: Any, reference_path: Path, candidate_path: Path) -> None:
    from trtls.triage.probe import model_inputs

    ref = {i.name: np.dtype(i.dtype) for i in model_inputs(reference)}
    got = {i.name: np.dtype(i.dtype) for i in model_inputs(candidate)}
    if ref != got:
        raise DivergenceUnavailable(
            f"the two models take different inputs: {reference_path} takes {_names(ref)}, {candidate_path} takes "
            f"{_names(got)}; a divergence is measured on the same inputs"
        )


def _nothing_shared(reference: Any, candidate: Any, reference_path: Path, candidate_path: Path) -> str:
    def outputs(model: Any) -> str:
        return ", ".join(o.name for o in model.graph.output) or "none"

    return (
        f"the two models share no floating-point tensor of the same name and shape, so nothing can be compared: "
        f"{reference_path} returns {outputs(reference)}, {candidate_path} returns {outputs(candidate)}; tensors are "
        "matched by name (an export or optimizer that renames them needs its names mapped back)"
    )


def _names(inputs: dict[str, Any]) -> str:
    return ", ".join(f"{name} ({dtype})" for name, dtype in inputs.items()) or "none"


def run_pair_divergence(
    loaded: LoadedRecipe,
    reference_path: Path,
    candidate_path: Path,
    *,
    engine: str | None = None,
    inputs: Path | None = None,
    rtol: float | None = None,
    token: CancelToken | None = None,
    rid: str | None = None,
) -> DivergenceResult:
    """Compare `candidate_path` with `reference_path`; the evidence is written under the recipe's `.trtls/reduce/`.
    `engine` (optional) gives the profiles whose opt shapes seeded random inputs take when `inputs` is None.
    `rid` is the search's id when the caller announced one (the editor's). Raises DivergenceUnavailable (a located,
    plain reason) for a model that cannot be read or inputs that differ."""
    token = token or CancelToken()
    reference = _load(reference_path, "reference")
    candidate = _load(candidate_path, "candidate")
    _same_inputs(reference, candidate, reference_path, candidate_path)
    if inputs is not None:
        feed = load_feed(inputs, reference)
        inputs_text = str(inputs)
    else:
        profiles = loaded.engine(engine).job_profiles() if engine is not None else []
        feed = random_feed(reference, profiles)
        inputs_text = (
            "seeded random inputs at "
            + (
                f"engine {engine}'s first profile's opt shapes"
                if profiles
                else "the models' static shapes (1 for a dynamic axis)"
            )
            + " (no inputs given)"
        )
    threshold = rtol if rtol is not None else PAIR_RTOL
    comp = None
    if not token.is_set:
        try:
            comp = compare(reference, candidate, feed, threshold, {})
        except RuntimeError as exc:  # ONNX Runtime cannot load or run one of them
            raise DivergenceUnavailable(str(exc)) from None
    first = comp.first if comp is not None else None
    shared = {t.tensor for t in comp.tensors} if comp is not None else set()
    made = {o for n in reference.graph.node for o in n.output if o}
    if comp is not None and not shared:  # "no tensor leaves tolerance" would be said of nothing compared
        raise DivergenceUnavailable(_nothing_shared(reference, candidate, reference_path, candidate_path))
    rid = rid or new_build_id(f"diverge-{engine or reference_path.stem}")
    folder = state_dir(loaded.path) / "reduce" / rid
    record: dict[str, Any] = {
        "kind": "divergence",
        "mode": "models",
        "id": rid,
        "engine": engine,
        "route": None,
        "precision": None,
        "reference": str(reference_path),
        "candidate": str(candidate_path.absolute()),
        "inputs": inputs_text,
        "rule": RULE.replace("converted", "candidate"),
        "rangeRtol": threshold,
        "outputTolerances": {},
        "firstDiverging": first.record() if first else None,
        "proposal": None,  # two given models: the answer is the node named, there is no conversion to change
        "fixAsked": False,
        "fixed": None,
        "excludeNodes": [],
        "widened": [],
        "cancelled": token.is_set,
        "cancelSource": token.source,
        # float tensors both models make (by name, same shape), compared; the reference's others (absent from the
        # candidate, integer, or shaped otherwise) are counted and the first few named
        "comparedTensors": len(shared),
        "notCompared": len(made - shared),
        "notComparedNames": sorted(made - shared)[:20],
        "rounds": []
        if comp is None
        else [
            {
                "excludeNodes": [],
                "convertedModel": str(candidate_path.absolute()),
                "outputErrors": comp.output_errors,
                "outputRangeError": comp.output_range_error,
                **comp.verdict(),
            }
        ],
        "ranHere": "onnxruntime (CPU) for both models",
        "parityRerun": None,
    }
    root = state_root(folder)
    ensure_folder(folder, within=root)
    record = standard_json(record)
    atomic_write_text(
        folder / DIVERGENCE_NAME, json.dumps(record, indent=2, allow_nan=False), kind=Kind.evidence, within=root
    )
    return DivergenceResult.written({**record, "folder": str(folder)})
