"""A contiguous run of a model's nodes (in topological order) as a model TensorRT can build on its own.

The candidate's inputs are the tensors its nodes read that it does not produce (including the outer-scope tensors an
`If`/`Loop` body reads); a tensor the probe saw with one small integer value in every run is frozen to that value (a
shape tensor cannot be a profiled input). Its outputs are the tensors it produces that none of its nodes reads, and
the model's own outputs. Its profiles come from the probed shapes, profile by profile.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from trtls.triage.probe import POINTS, TensorFacts


@dataclass
class Candidate:
    model: Any  # onnx ModelProto
    nodes: int  # how many nodes it keeps
    compute_nodes: int  # of which not `Constant` (the scale Polygraphy's markers count on)
    first: int  # index of its first node in the original order
    last: int  # index of its last node
    node_names: list[str]
    profiles: list[dict[str, Any]]  # as the worker protocol carries them


def _subgraph_reads(node: Any) -> list[Any]:
    """The outer-scope tensors an If/Loop/Scan body reads (every tensor read there, nested bodies included, that the
    body does not make)."""
    reads: list[Any] = []
    for sub in node.subgraphs(recursive=False) if hasattr(node, "subgraphs") else ():
        made = {id(t) for n in sub.nodes for t in n.outputs} | {id(t) for t in sub.inputs}
        reads.extend(t for n in sub.nodes for t in reads_of(n) if id(t) not in made)
    return reads


def reads_of(node: Any) -> list[Any]:
    return [*node.inputs, *_subgraph_reads(node)]


def _is_constant(tensor: Any) -> bool:
    import onnx_graphsurgeon as gs

    return isinstance(tensor, gs.Constant) or not tensor.name  # an empty name is an omitted optional input


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


def _ancestors(nodes: list[Any], last: int, first: int) -> list[Any]:
    """Node `last` and every node in `first..last` it depends on, in their original order."""
    producer = {id(t): i for i, n in enumerate(nodes) for t in n.outputs}
    keep, todo = {last}, [last]
    while todo:
        for t in reads_of(nodes[todo.pop()]):
            i = producer.get(id(t))
            if i is not None and first <= i and i not in keep:
                keep.add(i)
                todo.append(i)
    return [nodes[i] for i in sorted(keep)]


def cut(graph: Any, first: int, last: int, facts: dict[str, TensorFacts], n_profiles: int) -> Candidate:
    """Node `last` of `graph` (an onnx_graphsurgeon Graph, toposorted) with the nodes from `first` on that it depends
    on, as a model of its own: its outputs are node `last`'s (the model's own outputs when `last` is the final node
    and `first` is 0 — the whole model is then the candidate, unchanged)."""
    import onnx_graphsurgeon as gs

    g = graph.copy()
    whole = first == 0 and last == len(g.nodes) - 1
    kept = list(g.nodes) if whole else _ancestors(g.nodes, last, first)
    made = {id(t) for n in kept for t in n.outputs}
    model_inputs = {id(t) for t in g.inputs}  # the model's own inputs stay inputs: freezing one changes the model
    new_inputs: list[Any] = []
    frozen: list[Any] = []
    seen: set[int] = set()
    for node in kept:
        for t in reads_of(node):
            if id(t) in made or id(t) in seen or _is_constant(t):
                continue
            seen.add(id(t))
            f = facts.get(t.name)
            if f is not None and f.value is not None and not f.varies and id(t) not in model_inputs:
                t.inputs.clear()  # (it had a producer outside the run)
                value = gs.Constant(f"{t.name}_frozen_value", np.asarray(f.value))
                frozen.append(gs.Node("Constant", name=f"{t.name}_frozen", attrs={"value": value}, outputs=[t]))
                continue
            if f is not None:
                t.dtype, t.shape = f.dtype, _input_shape(f)
            new_inputs.append(t)
    outputs = list(g.outputs) if whole else [t for t in g.nodes[last].outputs if t.name and t.name in facts]
    for t in outputs:
        t.dtype, t.shape = facts[t.name].dtype, _input_shape(facts[t.name])
    g.nodes = [*frozen, *kept]
    g.inputs, g.outputs = new_inputs, outputs
    g.cleanup(remove_unused_graph_inputs=True).toposort()
    profiles = []
    for index in range(n_profiles):
        entries = [e for t in g.inputs if (e := _profile_entry(t.name, facts[t.name], index)) is not None]
        if entries:
            profiles.append({"inputs": entries})
    exported = gs.export_onnx(g)
    nodes = exported.graph.node  # what the candidate holds, frozen constants included
    compute = sum(1 for n in nodes if n.op_type != "Constant")
    names = [n.name for n in nodes if n.op_type != "Constant"]
    return Candidate(exported, len(nodes), compute, first, last, names, profiles)
