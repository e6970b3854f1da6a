"""Every tensor's shapes for a reduction (`probe_shapes`): ONNX Runtime's probe (`probe`), or its fallback for a model
ONNX Runtime cannot run (a custom op it does not know, a TensorRT plugin node, a kernel its CPU lacks): ONNX shape
inference (`onnx.shape_inference.infer_shapes`, `data_prop=True`) once per profile point, with the model's inputs
fixed to that point's shapes.

It says less than a run: a tensor has facts only where inference gave its dtype and every dimension at every point
of every profile — nothing after an op inference does not know (no schema, so no output shape) unless the model
declares that op's output, and nothing whose size depends on data. The declaration: the model's `value_info` or graph
output for an unknown op's output (as exporters write them), in dimensions the inputs name (`[N, 16, 64]` beside an
input `x: [N, 16, 64]`); at each point it is given to inference with `N` at the input's size there, and inference
carries it on through the ops it knows (`declared_outputs`). A declaration is a claim, not a measurement, so the
record names the tensors that rest on one; a wrong one only makes a trial fail otherwise, which a reduction counts as
"does not reproduce". It never measures a value: every tensor's `value_known` is False, so a small integer tensor (a
shape-like one) is never frozen nor made a profiled input; the nodes that compute it come along into a cut instead
(`subgraph`). A tensor without facts is never a cut's input or output (`subgraph.Candidate.unknown`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Final

import numpy as np

from trtls.core.triage_records import ShapeProbeRecord
from trtls.triage.probe import POINTS, TensorFacts, every_tensor_session, model_inputs, probe_tensors


def _fixed_shape(declared: list[Any]) -> list[int]:
    """An input no profile names: its static dimensions, 1 for a dynamic one (as the ONNX Runtime probe feeds it)."""
    return [d if isinstance(d, int) and d >= 0 else 1 for d in declared]


def _set_shape(value: Any, shape: list[int]) -> None:
    dims = value.type.tensor_type.shape.dim
    del dims[:]
    for size in shape:
        dims.add().dim_value = int(size)


def _inferred(value: Any) -> tuple[Any, list[int]] | None:
    """A value info's numpy dtype and shape, when inference gave both completely; None otherwise."""
    import onnx

    tensor = value.type.tensor_type
    if not value.type.HasField("tensor_type") or not tensor.elem_type or not tensor.HasField("shape"):
        return None
    if not all(d.HasField("dim_value") for d in tensor.shape.dim):
        return None
    try:
        dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(tensor.elem_type))
    except (KeyError, TypeError):  # a type numpy cannot hold (a float8, a string): no facts
        return None
    return dtype, [int(d.dim_value) for d in tensor.shape.dim]


def declared_outputs(model: Any) -> dict[str, Any]:
    """The outputs of the ops ONNX shape inference has no schema for, that the model declares with a type and a
    shape (`value_info`, else a graph output): name → that declaration (an onnx ValueInfoProto)."""
    import onnx

    g = model.graph
    declared = {v.name: v for v in [*g.output, *g.value_info]}  # a value_info wins over the output's own
    unknown_ops = [n for n in g.node if not onnx.defs.has(n.op_type, n.domain or "")]
    found = {}
    for node in unknown_ops:
        for name in node.output:
            value = declared.get(name)
            if value is not None and value.type.tensor_type.elem_type and value.type.tensor_type.HasField("shape"):
                found[name] = value
    return found


def _resolved(value: Any, sizes: dict[str, int]) -> list[int] | None:
    """A declared shape with each named dimension at its size in `sizes`; None when one is neither a number nor
    named by an input."""
    out = []
    for d in value.type.tensor_type.shape.dim:
        if d.HasField("dim_value") and d.dim_value >= 0:
            out.append(int(d.dim_value))
        elif d.HasField("dim_value"):  # a negative size is no size
            return None
        elif d.dim_param in sizes:
            out.append(sizes[d.dim_param])
        else:
            return None
    return out


def _sizes(inputs: list[Any], shapes: dict[str, list[int]]) -> dict[str, int]:
    """What each named dimension of the inputs is at one point (a name two inputs give two sizes is left out)."""
    sizes: dict[str, int] = {}
    clash: set[str] = set()
    for spec in inputs:
        shape = shapes.get(spec.name, _fixed_shape(spec.shape or []))
        for dim, size in zip(spec.shape or [], shape, strict=False):
            if isinstance(dim, str):
                if sizes.setdefault(dim, int(size)) != int(size):
                    clash.add(dim)
    return {k: v for k, v in sizes.items() if k not in clash}


def inferred_tensors(model: Any, profiles: list[dict[str, Any]]) -> tuple[dict[str, TensorFacts], list[str]]:
    """The facts ONNX shape inference gives for every top-level tensor of `model` (an onnx ModelProto), profile point
    by profile point: only the tensors whose dtype and shape it inferred at every point (see the module's text); and
    the outputs of unknown ops whose facts rest on the model's declaration (`declared_outputs`). Raises what
    `infer_shapes` raises (a model it cannot read)."""
    import onnx

    inputs = model_inputs(model)
    constants = {i.name for i in model.graph.initializer}
    fixed = onnx.ModelProto()
    fixed.CopyFrom(model)
    graph_inputs = {value.name: value for value in fixed.graph.input if value.name not in constants}
    declared = declared_outputs(model)
    fixed_values = {v.name: v for v in fixed.graph.value_info}
    for name, value in declared.items():  # given to inference as a value_info, resolved point by point below
        if name not in fixed_values:
            fixed_values[name] = fixed.graph.value_info.add()
            fixed_values[name].CopyFrom(value)
    facts: dict[str, TensorFacts] = {}
    conflicting: set[str] = set()  # a tensor inference gave two dtypes at two points: no fact to trust
    points = 0
    for index, profile in enumerate(profiles or [{"inputs": []}]):
        for point in POINTS:
            shapes = {i["input"]: i[point] for i in profile["inputs"]}
            for spec in inputs:
                _set_shape(graph_inputs[spec.name], shapes.get(spec.name, _fixed_shape(spec.shape or [])))
            sizes = _sizes(inputs, shapes)
            for name, value in declared.items():
                resolved = _resolved(value, sizes)
                if resolved is not None:
                    _set_shape(fixed_values[name], resolved)
                else:  # a dimension the inputs do not name: as declared, so no facts at this point
                    fixed_values[name].CopyFrom(value)
            inferred = onnx.shape_inference.infer_shapes(fixed, data_prop=True)
            points += 1
            g = inferred.graph
            for value in [*g.input, *g.value_info, *g.output]:
                known = _inferred(value) if value.name not in constants else None
                if known is None:
                    continue
                dtype, shape = known
                f = facts.setdefault(value.name, TensorFacts(dtype=dtype, value_known=False))
                if f.dtype != dtype:
                    conflicting.add(value.name)
                while len(f.shapes) <= index:
                    f.shapes.append({})
                f.shapes[index][point] = shape
    # a tensor some point did not infer has no facts: a profile needs its shape at min, opt and max
    complete = {name: f for name, f in facts.items() if sum(len(per) for per in f.shapes) == points}
    kept = {name: f for name, f in complete.items() if name not in conflicting}
    return kept, sorted(name for name in declared if name in kept)


RUNTIME: Final = "onnx_runtime"
INFERENCE: Final = "onnx_shape_inference"
REASON_MAX_CHARS = 400
# what a reason may not carry into a record a terminal prints: C0/C1 controls, bidi overrides, lone surrogates
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c]+")


def one_line(text: str) -> str:
    """`text` as one printable line: whitespace runs become a space, control characters are dropped, at most
    REASON_MAX_CHARS characters."""
    flat = _CONTROL.sub("", re.sub(r"\s+", " ", text)).strip()
    return flat if len(flat) <= REASON_MAX_CHARS else flat[: REASON_MAX_CHARS - 1] + "…"


@dataclass
class ShapeProbe:
    """Every tensor's facts and the record of the probe that gave them."""

    facts: dict[str, TensorFacts]
    record: ShapeProbeRecord

    @property
    def inferred(self) -> bool:
        """The facts are shape inference's: some tensors have none, and no value was measured."""
        return self.record.probe == INFERENCE


def probe_shapes(model: Any, profiles: list[dict[str, Any]]) -> ShapeProbe:
    """ONNX Runtime's facts (`probe_tensors`), or, when ONNX Runtime cannot load the model, ONNX shape inference's
    (`inferred_tensors`), with why. A model ONNX Runtime loads but does not run at a profile point
    is the profile's mistake (ProfileShapesRejected), not a reason to infer."""
    try:
        session = every_tensor_session(model)
    except RuntimeError as exc:
        reason = one_line(str(exc.__cause__ or exc))
        try:
            facts, declared = inferred_tensors(model, profiles)
        except Exception as inference:  # neither probe: the reduction's error says both reasons
            said = one_line(f"{type(inference).__name__}: {inference}")
            message = f"ONNX Runtime could not run the model ({reason}), nor ONNX shape inference ({said})"
            raise RuntimeError(message) from inference
        text = f"shapes from ONNX shape inference: ONNX Runtime could not run the model: {reason}"
        if declared:
            shown = ", ".join(declared[:5]) + (", …" if len(declared) > 5 else "")
            text += " " + one_line(f"(an unknown op's outputs as the model declares them: {shown})")  # one_line strips
        record = ShapeProbeRecord(probe=INFERENCE, reason=reason, text=text, declared=declared or None)
        return ShapeProbe(facts, record)
    text = "shapes from ONNX Runtime: one run per profile point"
    return ShapeProbe(probe_tensors(model, profiles, session=session), ShapeProbeRecord(probe=RUNTIME, text=text))
