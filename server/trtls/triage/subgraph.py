"""A contiguous run of a model's nodes (in topological order) as a model TensorRT can build on its own, cut with
`onnx` alone (a reduction needs no onnx_graphsurgeon: the `gates` extra is enough).

Two cuts. A **branch** is one node and the nodes of the run it depends on; its outputs are that node's. A **span**
is every node of the run that makes what the rest of the model reads; its outputs are the tensors it makes that the
model returns or that a later node reads — the span keeps every branch of a model with several outputs, so a failing
branch that ends before another output's deeper branch is not dropped. A span that grows by one node contains the
smaller one: whether it fails changes once along the order, which is what a bisection needs.

The candidate's inputs are the tensors its nodes read that it does not make (including the outer-scope tensors an
`If`/`Loop` body reads); a tensor the probe saw with one small integer value in every run is frozen to that value (a
shape tensor cannot be a profiled input). Its profiles come from the probed shapes, profile by profile. A tensor the
probe has no facts for (shape inference's, after an op it does not know) is never guessed: a cut that needs it as an
input or an output says so (`Candidate.unknown`) and the searches do not build it.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import Any

import numpy as np

from trtls.triage.probe import CONSTANT_MAX_ELEMENTS, POINTS, TensorFacts


@dataclass
class Candidate:
    model: Any  # onnx ModelProto
    nodes: int  # how many nodes it keeps
    compute_nodes: int  # of which not `Constant` (the scale Polygraphy's markers count on)
    first: int  # index of its first node in the original order
    last: int  # index of its last node
    node_names: list[str]
    profiles: list[dict[str, Any]]  # as the worker protocol carries them
    outputs: tuple[str, ...] = ()
    branch: bool = True  # a branch (node `last` and what it depends on) or a span (every branch of the run)
    # the inputs and outputs it needs whose shape (or, for a small integer tensor, value) the probe does not know:
    # written without a type, so TensorRT cannot build it as the original model would be built
    unknown: tuple[str, ...] = ()

    @property
    def key(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """What makes two cuts the same model: the nodes kept and the outputs returned."""
        return tuple(self.node_names), self.outputs


def _body_reads(node: Any) -> list[str]:
    """The outer-scope tensors an If/Loop/Scan body reads: every tensor read there (nested bodies included) that the
    body neither makes nor takes as an input or initializer."""
    import onnx

    reads: list[str] = []
    for attr in node.attribute:
        bodies = [attr.g] if attr.type == onnx.AttributeProto.GRAPH else list(attr.graphs)
        for body in bodies:
            made = {o for n in body.node for o in n.output} | {i.name for i in body.input}
            made |= {i.name for i in body.initializer}
            reads.extend(t for n in body.node for t in reads_of(n) if t and t not in made)
    return reads


def reads_of(node: Any) -> list[str]:
    """The tensor names `node` reads (an omitted optional input, '', is none)."""
    return [t for t in [*node.input, *_body_reads(node)] if t]


@dataclass
class Graph:
    """A model's top-level graph, its nodes in a topological order (the file's own order where it is one)."""

    model: Any
    nodes: list[Any]
    reads: list[list[str]]
    producer: dict[str, int]
    constants: set[str]  # initializers
    inputs: list[str]  # the model's own inputs (an initializer listed as an input is not one)
    outputs: list[str]


def load_graph(model: Any) -> Graph:
    """The graph of `model` (an onnx ModelProto), toposorted stably: a node comes as early as what it reads allows,
    in the file's order. Raises ValueError for a graph with a cycle."""
    g = model.graph
    constants = {i.name for i in g.initializer} | {s.values.name for s in g.sparse_initializer}
    nodes = list(g.node)
    reads = [reads_of(n) for n in nodes]
    made_by = {o: i for i, n in enumerate(nodes) for o in n.output if o}
    waiting = [len({made_by[t] for t in r if t in made_by and made_by[t] != i}) for i, r in enumerate(reads)]
    readers: dict[int, list[int]] = {}
    for i, r in enumerate(reads):
        for p in {made_by[t] for t in r if t in made_by and made_by[t] != i}:
            readers.setdefault(p, []).append(i)
    ready = [i for i, w in enumerate(waiting) if w == 0]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        i = heapq.heappop(ready)
        order.append(i)
        for reader in readers.get(i, ()):
            waiting[reader] -= 1
            if waiting[reader] == 0:
                heapq.heappush(ready, reader)
    if len(order) != len(nodes):
        raise ValueError("the model's graph has a cycle: its nodes have no topological order")
    sorted_nodes = [nodes[i] for i in order]
    return Graph(
        model,
        sorted_nodes,
        [reads[i] for i in order],
        {o: k for k, n in enumerate(sorted_nodes) for o in n.output if o},
        constants,
        [i.name for i in g.input if i.name not in constants],
        [o.name for o in g.output],
    )


def _profile_entry(name: str, facts: TensorFacts, index: int) -> dict[str, Any] | None:
    points = facts.shapes[index] if index < len(facts.shapes) else {}
    shapes = [points[p] for p in POINTS if p in points]
    if not shapes or all(s == shapes[0] for s in shapes[1:]):
        return None  # static under this profile: TensorRT needs no range for it
    lo = [min(d) for d in zip(*shapes, strict=True)]
    hi = [max(d) for d in zip(*shapes, strict=True)]
    opt = [min(max(d, a), b) for d, a, b in zip(points.get("opt", shapes[0]), lo, hi, strict=True)]
    return {"input": name, "min": lo, "opt": opt, "max": hi}


def _input_shape(facts: TensorFacts) -> list[Any]:
    every = [s for per in facts.shapes for s in per.values()]
    if not every:
        return []
    return [
        dims[0] if all(d == dims[0] for d in dims) else f"d{axis}" for axis, dims in enumerate(zip(*every, strict=True))
    ]


def _needed(graph: Graph, seeds: list[int], first: int) -> list[int]:
    """`seeds` and every node from `first` on that they depend on, in order."""
    keep, todo = set(seeds), list(seeds)
    while todo:
        for t in graph.reads[todo.pop()]:
            i = graph.producer.get(t)
            if i is not None and first <= i and i not in keep:
                keep.add(i)
                todo.append(i)
    return sorted(keep)


def _shape_like_varying(f: TensorFacts | None) -> bool:
    """A small integer tensor whose values change with the profile's shapes (a batch size computed by Shape, Slice,
    Concat), or whose values no probe measured (shape inference's facts): TensorRT takes it as an input only with
    values per profile point, which a cut cannot give."""
    if f is None or (not f.varies and f.value_known) or np.issubdtype(f.dtype, np.floating) or f.dtype == np.bool_:
        return False
    sizes = [int(np.prod(shape)) for points in f.shapes for shape in points.values()]
    return bool(sizes) and max(sizes) <= CONSTANT_MAX_ELEMENTS


def _with_shape_makers(graph: Graph, kept: list[int], facts: dict[str, TensorFacts]) -> list[int]:
    """`kept` and, for each shape-like tensor it reads that varies with the profile (`_shape_like_varying`), every
    node that makes it: the shape computation comes along, from the model's own inputs, instead of becoming an
    input (what Polygraphy gets by folding at one static shape; here every profile keeps its range)."""
    keep = set(kept)
    todo = list(kept)
    while todo:
        for t in graph.reads[todo.pop()]:
            i = graph.producer.get(t)
            if i is None or i in keep or not _shape_like_varying(facts.get(t)):
                continue
            for k in _shape_makers(graph, i):
                if k not in keep:
                    keep.add(k)
                    todo.append(k)
    return sorted(keep)


SHAPE_READERS = {"Shape", "Size"}  # read a tensor's shape, not its values: what makes that tensor is not needed


def _shape_makers(graph: Graph, start: int) -> list[int]:
    """Node `start` and what it depends on, not past a `Shape`/`Size` (the tensor it reads becomes an input)."""
    keep, todo = {start}, [start]
    while todo:
        k = todo.pop()
        if graph.nodes[k].op_type in SHAPE_READERS:
            continue
        for t in graph.reads[k]:
            i = graph.producer.get(t)
            if i is not None and i not in keep:
                keep.add(i)
                todo.append(i)
    return sorted(keep)


def _span_outputs(graph: Graph, first: int, last: int) -> list[str]:
    """What nodes `first..last` make that the model returns or a node after `last` reads, in the order made."""
    later = {t for k in range(last + 1, len(graph.nodes)) for t in graph.reads[k]} | set(graph.outputs)
    return [o for k in range(first, last + 1) for o in graph.nodes[k].output if o and o in later]


def _value_info(name: str, facts: TensorFacts | None, fallback: Any = None) -> Any:
    import onnx

    if facts is None:
        if fallback is not None:
            return fallback
        return onnx.helper.make_empty_tensor_value_info(name)
    elem = onnx.helper.np_dtype_to_tensor_dtype(np.dtype(facts.dtype))
    return onnx.helper.make_tensor_value_info(name, elem, _input_shape(facts))


@dataclass
class _Selection:
    """What a cut keeps and reads, before any model is made (`cut` makes it; `unknown_tensors` needs only this)."""

    whole: bool
    kept: list[int]
    outputs: list[str]
    new_inputs: list[str]
    frozen: list[Any]  # Constant nodes: the ones before the cut, and the frozen values
    read_constants: set[str]
    unknown: list[str]


def _select(graph: Graph, first: int, last: int, facts: dict[str, TensorFacts], branch: bool) -> _Selection:
    import onnx

    g = graph.model.graph
    whole = first == 0 and last == len(graph.nodes) - 1 and not branch
    if branch:
        outputs = [t for t in graph.nodes[last].output if t]
        kept = _needed(graph, [last], first)
    else:
        outputs = list(graph.outputs) if whole else _span_outputs(graph, first, last)
        kept = _needed(graph, sorted({graph.producer[t] for t in outputs if t in graph.producer}), first)
    if not whole:
        kept = _with_shape_makers(graph, kept, facts)
    made = {o for k in kept for o in graph.nodes[k].output if o}
    own_inputs = {i.name for i in g.input}
    own_outputs = _typed_outputs(g)
    unknown = [] if whole else [t for t in outputs if t not in facts and t not in own_outputs]
    new_inputs: list[str] = []
    frozen: list[Any] = []
    read_constants: set[str] = set()
    seen: set[str] = set()
    for k in kept:
        for t in graph.reads[k]:
            if t in made or t in seen:
                continue
            seen.add(t)
            if t in graph.constants:
                read_constants.add(t)
                continue
            maker = graph.producer.get(t)
            if maker is not None and graph.nodes[maker].op_type == "Constant" and not graph.reads[maker]:
                frozen.append(graph.nodes[maker])  # a Constant before the cut comes along: never a new model input
                continue
            f = facts.get(t)
            if f is not None and f.value is not None and not f.varies and t not in own_inputs:
                value = onnx.numpy_helper.from_array(np.asarray(f.value), name=f"{t}_frozen_value")
                frozen.append(onnx.helper.make_node("Constant", [], [t], name=f"{t}_frozen", value=value))
                continue
            if t not in own_inputs and (f is None or _shape_like_varying(f)):
                unknown.append(t)  # no shape to give it, or values per profile point no cut can give
            new_inputs.append(t)
    return _Selection(whole, kept, outputs, new_inputs, frozen, read_constants, unknown)


def _typed_outputs(g: Any) -> dict[str, Any]:
    """The model's outputs it declares with a type: one keeps its declaration where the probe has no facts for it."""
    return {o.name: o for o in g.output if o.type.tensor_type.elem_type}


def unknown_tensors(
    graph: Graph, first: int, last: int, facts: dict[str, TensorFacts], *, branch: bool = True
) -> tuple[str, ...]:
    """`cut(graph, first, last, facts, …).unknown`, without making the model (a search filters every cut by it)."""
    return tuple(_select(graph, first, last, facts, branch).unknown)


def cut(
    graph: Graph, first: int, last: int, facts: dict[str, TensorFacts], n_profiles: int, *, branch: bool = True
) -> Candidate:
    """Nodes `first..last` of `graph` as a model of its own: with `branch`, node `last` and what it depends on
    (its outputs are node `last`'s); without, the span (its outputs are what the rest of the model reads from it).
    The whole model (`first` 0, `last` the final node, a span) is the model, unchanged."""
    import onnx

    g = graph.model.graph
    sel = _select(graph, first, last, facts, branch)
    own_inputs = {i.name: i for i in g.input}
    own_outputs = _typed_outputs(g)
    model = onnx.ModelProto()
    if sel.whole:
        model.CopyFrom(graph.model)
    else:
        made = {o for k in sel.kept for o in graph.nodes[k].output if o}
        _shell(model, graph.model)
        out = model.graph
        out.name = g.name
        out.node.extend([*sel.frozen, *(graph.nodes[k] for k in sel.kept)])
        out.input.extend(_value_info(t, facts.get(t), own_inputs.get(t)) for t in sel.new_inputs)
        out.output.extend(_value_info(t, facts.get(t), own_outputs.get(t)) for t in sel.outputs)
        out.initializer.extend(i for i in g.initializer if i.name in sel.read_constants)
        out.sparse_initializer.extend(s for s in g.sparse_initializer if s.values.name in sel.read_constants)
        ends = {i.name for i in out.input} | {o.name for o in out.output}
        out.value_info.extend(v for v in g.value_info if v.name in made and v.name not in ends)
    profiles = []
    for index in range(n_profiles):
        entries = [
            e for i in model.graph.input if i.name in facts and (e := _profile_entry(i.name, facts[i.name], index))
        ]
        if entries:
            profiles.append({"inputs": entries})
    nodes = model.graph.node  # what the candidate holds, frozen constants included
    compute = sum(1 for n in nodes if n.op_type != "Constant")
    names = [n.name for n in nodes if n.op_type != "Constant"]
    return Candidate(
        model,
        len(nodes),
        compute,
        first,
        last,
        names,
        profiles,
        tuple(o.name for o in model.graph.output),
        branch,
        tuple(sel.unknown),
    )


@dataclass
class Whole:
    """The key `subgraph.cut` gives the span of every node: the model itself, which the confirm trial built."""

    key: tuple[tuple[str, ...], tuple[str, ...]]

    @classmethod
    def of(cls, model: Any) -> Whole:
        names = tuple(n.name for n in model.graph.node if n.op_type != "Constant")
        return cls((names, tuple(o.name for o in model.graph.output)))


def _shell(into: Any, model: Any) -> None:
    """`model` without its graph's contents: the opsets, IR version, functions and metadata a cut keeps."""
    into.ir_version = model.ir_version
    into.opset_import.extend(model.opset_import)
    into.functions.extend(model.functions)
    into.producer_name = model.producer_name
    into.producer_version = model.producer_version
    into.domain = model.domain
    into.model_version = model.model_version
