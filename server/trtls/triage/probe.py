"""What every tensor of a model looks like under each profile shape: one ONNX Runtime run per (profile, min/opt/max)
with every top-level tensor marked as an output.

A reduced model gets new graph inputs in the middle of the network; TensorRT needs their shapes for every profile,
and a tensor that carries shape values (an int64 `Shape → Gather → Concat` chain) must be frozen to the value it had,
because TensorRT cannot take a shape tensor as a profiled input. The probe records both — the same facts Polygraphy's
`debug reduce` gets from its ONNX Runtime fallback inference.

A model ONNX Runtime cannot load (a custom op it does not know, a TensorRT plugin node) is probed by ONNX shape
inference instead (`shape_inference.probe_shapes`): fewer facts, and the record says which probe gave them and why.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

POINTS = ("min", "opt", "max")
# A tensor whose value is identical in every probe run and at most this many elements is a shape-like constant.
CONSTANT_MAX_ELEMENTS = 64


@dataclass
class TensorFacts:
    dtype: Any  # numpy dtype
    shapes: list[dict[str, list[int]]] = field(default_factory=list)  # per profile: {min, opt, max} → shape
    value: Any = None  # the value when it never changed across the runs and is small (a shape-like tensor)
    varies: bool = False
    value_known: bool = True  # False: no run measured the value (shape inference): never frozen, never guessed


def _feed(inputs: list[InputSpec], profile: dict[str, Any], point: str, rng: np.random.Generator) -> dict[str, Any]:
    shapes = {i["input"]: i[point] for i in profile["inputs"]}
    feed: dict[str, Any] = {}
    for spec in inputs:
        shape = shapes.get(spec.name, [d if isinstance(d, int) and d >= 0 else 1 for d in (spec.shape or [])])
        dtype = np.dtype(spec.dtype)
        if np.issubdtype(dtype, np.floating):
            feed[spec.name] = rng.standard_normal(shape).astype(dtype)
        elif dtype == np.bool_:
            feed[spec.name] = np.ones(shape, dtype=dtype)
        else:  # integer inputs: small non-negative values (indices, token ids, sample rates stay valid)
            feed[spec.name] = np.ones(shape, dtype=dtype)
    return feed


@dataclass
class InputSpec:
    """A model input as the probe feeds it: its name, shape (ints; a name or None for a dynamic axis) and dtype."""

    name: str
    shape: list[Any]
    dtype: Any  # numpy dtype


def model_inputs(model: Any) -> list[InputSpec]:
    """The inputs `model` (an onnx ModelProto) takes: its graph inputs that no initializer gives a value."""
    import onnx

    g = model.graph
    constants = {i.name for i in g.initializer}
    specs = []
    for value in g.input:
        if value.name in constants:
            continue
        tensor = value.type.tensor_type
        shape = [d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in tensor.shape.dim]
        dtype = onnx.helper.tensor_dtype_to_np_dtype(tensor.elem_type) if tensor.elem_type else np.dtype(np.float32)
        specs.append(InputSpec(value.name, shape, dtype))
    return specs


def every_tensor_session(model: Any) -> Any:
    """An ONNX Runtime CPU session of `model` with every top-level tensor marked as an output (Polygraphy's
    `--onnx-outputs mark all`), graph optimizations off so that every tensor keeps its name and its value."""
    import onnx
    import onnxruntime as ort

    taken = {i.name for i in model.graph.input} | {i.name for i in model.graph.initializer}
    wide = onnx.ModelProto()
    wide.CopyFrom(model)
    del wide.graph.output[:]
    seen: set[str] = set()
    for node in model.graph.node:
        for name in node.output:
            if name and name not in taken and name not in seen:
                seen.add(name)
                wide.graph.output.append(onnx.ValueInfoProto(name=name))
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    opts.intra_op_num_threads = 1
    try:
        return ort.InferenceSession(wide.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    except Exception as exc:
        raise RuntimeError(f"ONNX Runtime cannot load the model with every tensor marked: {exc}") from exc


class ProfileShapesRejected(RuntimeError):
    """The model itself does not run at a profile point's shapes (ONNX Runtime refused them, as a model whose
    resizes need sizes a multiple of 32 refuses 100×100): the profile is the likely cause of the build's failure,
    not TensorRT, and there is nothing to reduce."""

    def __init__(self, index: int, point: str, shapes: dict[str, list[int]], reason: str) -> None:
        self.index, self.point, self.shapes, self.reason = index, point, shapes, reason
        super().__init__(
            f"the model itself does not run at profile {index}'s {point} shapes {shapes} in ONNX Runtime either "
            f"({reason.strip()}): the profile's shapes are the likely cause of the failure, not TensorRT — use "
            "shapes the model accepts; nothing to reduce"
        )


def probe_tensors(
    model: Any, profiles: list[dict[str, Any]], seed: int = 0, session: Any = None
) -> dict[str, TensorFacts]:
    """Run `model` (an onnx ModelProto) once per profile point through ONNX Runtime on the CPU (`session`, when
    given, is its `every_tensor_session`); return the facts of every top-level tensor that a run produced. Raises
    RuntimeError (with ONNX Runtime's message) when the model cannot be loaded, ProfileShapesRejected when a run
    fails."""
    inputs = model_inputs(model)
    session = session if session is not None else every_tensor_session(model)
    names = [o.name for o in session.get_outputs()]
    facts: dict[str, TensorFacts] = {}
    rng = np.random.default_rng(seed)
    for index, profile in enumerate(profiles or [{"inputs": []}]):
        for point in POINTS:
            feed = _feed(inputs, profile, point, rng)
            try:
                values = session.run(names, feed)
            except Exception as exc:
                shapes = {name: list(np.shape(value)) for name, value in feed.items()}
                raise ProfileShapesRejected(index, point, shapes, str(exc)) from exc
            for name, value in [*zip(names, values, strict=True), *feed.items()]:
                arr = np.asarray(value)
                f = facts.setdefault(name, TensorFacts(dtype=arr.dtype))
                while len(f.shapes) <= index:
                    f.shapes.append({})
                f.shapes[index][point] = list(arr.shape)
                if f.varies:
                    continue
                if f.value is None and arr.size <= CONSTANT_MAX_ELEMENTS and not np.issubdtype(arr.dtype, np.floating):
                    f.value = arr.copy()
                elif f.value is None or f.value.shape != arr.shape or not np.array_equal(f.value, arr):
                    f.varies, f.value = True, None
    return facts
