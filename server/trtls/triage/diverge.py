"""`trtls reduce --diverge`: the first tensor where a converted model (ModelOpt AutoCast fp16/bf16) leaves tolerance.

Both models — the reference (the engine's ONNX, unconverted) and the converted one (the same conversion the build
runs, from the precision cache) — run through ONNX Runtime on the CPU with every tensor marked as an output, on the
same inputs; their tensors are compared by name in the reference's topological order (AutoCast keeps node and tensor
names; the casts it inserts have their own). The rule, stated in the evidence: a tensor leaves tolerance when its
error relative to its own range, max|converted − reference| / max|reference|, exceeds the precision's relative
tolerance (`RANGE_RTOL`, or `--rtol`) — intermediate tensors have no tolerance of their own and their magnitudes differ
by orders, so an absolute bound cannot be shared. The model's outputs are also judged elementwise with the tolerances
given for them (a route's; Polygraphy's |a − b| ≤ atol + rtol·|b|).

The proposal: keep the node that produced the first diverging tensor in its original precision (AutoCast
`exclude_nodes`); with `fix`, convert again with it excluded and compare again, until the outputs pass or the rounds
run out. When excluding a node leaves the outputs' error no lower (the damage was done upstream, in the fp16 values it
reads — excluding it alone only moves the cast), the exclusion is widened upstream: the nodes that make what it reads
are excluded too, one level per round, until the outputs' error falls below the round before the exclusion. Executed
here for real through ONNX Runtime; the same comparison on a TensorRT engine (every layer output marked in the
network) needs a GPU TensorRT accepts and is not offered here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from trtls.fs.models import load_onnx

if TYPE_CHECKING:
    from trtls.core.triage_records import TensorDivergence

RANGE_RTOL = {"fp16": 3e-2, "bf16": 2e-1}  # ~60× each type's rounding step (2^-11, 2^-8): a sum of rounded terms
NEXT_SHOWN = 4  # diverging tensors listed after the first
MAX_FIX_ROUNDS = 6

RULE = (
    "a tensor leaves tolerance when max|converted - reference| / max|reference| exceeds the precision's relative "
    "tolerance; outputs must also pass |converted - reference| <= atol + rtol*|reference| elementwise; a converted "
    "tensor holding inf/NaN where the reference is finite is out of tolerance as an overflow (its errors are null); "
    "elements where the reference itself is inf/NaN are not compared (notCompared), and a tensor with no finite "
    "reference element is not_checked (withinTolerance null), never within tolerance; an output the converted model "
    "lacks or makes in another shape is not_checked too (outputsNotChecked)"
)


@dataclass
class TensorError:
    tensor: str
    node: str
    op: str
    max_abs: float
    range_error: float
    rel_l2: float
    nonfinite: int
    within: bool | None  # None: not_checked, the reference held no finite element to compare
    not_compared: int = 0  # elements where the reference is inf/NaN: not a number to match

    @property
    def overflow(self) -> bool:
        return self.nonfinite > 0

    def record(self) -> dict[str, Any]:
        """Standard JSON: an overflowed tensor's errors are null (not `Infinity`) and `overflow` says why."""
        return {
            "tensor": self.tensor,
            "node": self.node,
            "op": self.op,
            "maxAbsError": finite_or_none(self.max_abs),
            "rangeError": finite_or_none(self.range_error),
            "relL2": finite_or_none(self.rel_l2),
            "nonFinite": self.nonfinite,
            "overflow": self.overflow,
            "notCompared": self.not_compared,
            "withinTolerance": self.within,
        }


def finite_or_none(value: Any) -> float | None:
    """A float for JSON, or None for inf/NaN (which standard JSON cannot hold)."""
    if value is None:
        return None
    v = float(value)
    return v if np.isfinite(v) else None


def standard_json(value: Any) -> Any:
    """`value` with every non-finite float (Python or NumPy) replaced by None, so `json.dumps(allow_nan=False)`
    holds: divergence.json is read by browsers and other languages, whose parsers refuse `Infinity`/`NaN`."""
    if isinstance(value, dict):
        return {k: standard_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [standard_json(v) for v in value]
    if isinstance(value, float | np.floating):
        return finite_or_none(value)
    if isinstance(value, np.integer):
        return int(value)
    return value


def error_text(t: TensorDivergence, rtol: float) -> str:
    """A tensor record's error as words: `range error 0.31 > 0.03`, or its overflow with the count of inf/NaN."""
    if t.overflow or t.rangeError is None:
        return f"overflow: {t.nonFinite} inf/NaN values where the reference is finite"
    return f"range error {t.rangeError:.3g} > {rtol:g}"


@dataclass
class Comparison:
    tensors: list[TensorError] = field(default_factory=list)
    outputs_pass: bool = True  # no output was measured out of tolerance
    # outputs with no finite reference element, or that could not be compared (absent from the other side, or
    # shaped otherwise): nothing was measured of them, so the outputs never pass as a whole
    outputs_not_checked: list[str] = field(default_factory=list)
    output_errors: dict[str, float] = field(default_factory=dict)
    output_range_error: float = 0.0  # the worst output's range error (inf for an overflow): rounds are ranked by it

    @property
    def first(self) -> TensorError | None:
        return next((t for t in self.tensors if t.within is False), None)

    @property
    def outputs_checked_pass(self) -> bool:
        """Every output was compared and passed: what `fixed` and the route's parity may claim."""
        return self.outputs_pass and not self.outputs_not_checked

    def verdict(self) -> dict[str, Any]:
        """The comparison's verdict as every piece of evidence records it (a search's round, two models' comparison,
        the TensorRT engine's layer-wise comparison): whether the outputs passed, which could not be checked, the
        first diverging tensor, the next few, and every tensor compared."""
        first = self.first
        return {
            "outputsPass": self.outputs_pass,
            "outputsNotChecked": list(self.outputs_not_checked),
            "firstDiverging": first.record() if first else None,
            "next": [t.record() for t in self.tensors if t.within is False and t is not first][:NEXT_SHOWN],
            "tensors": [t.record() for t in self.tensors],
        }


def _error(ref: np.ndarray, got: np.ndarray) -> tuple[float, float, float, int]:
    """(max |error|, range error, relative L2, count of inf/NaN), over the elements where the reference is finite
    (a reference inf/NaN is not a number to match; `compare_values` counts them as not compared). A converted tensor
    holding inf or NaN where the reference is finite (an fp16 overflow, or a value computed from one) has no finite
    error: all three are inf, and the record says `overflow` instead of a number."""
    ref64, got64 = ref.astype(np.float64), got.astype(np.float64)
    finite = np.isfinite(ref64)
    bad = int(np.count_nonzero(~np.isfinite(got64) & finite))
    if bad:
        return math.inf, math.inf, math.inf, bad
    diff = np.abs(got64[finite] - ref64[finite])
    scale = float(np.max(np.abs(ref64[finite]), initial=0.0))
    max_abs = float(np.max(diff, initial=0.0))
    norm = float(np.linalg.norm(ref64[finite]))
    rel_l2 = float(np.linalg.norm(diff)) / norm if norm else max_abs
    return max_abs, (max_abs / scale if scale else max_abs), rel_l2, bad


def compare(
    reference: Any,
    converted: Any,
    feed: dict[str, np.ndarray],
    rtol: float,
    output_tolerances: dict[str, tuple[float, float]],
) -> Comparison:
    """Run both models (onnx ModelProtos) on `feed` with every tensor marked; judge every shared float tensor."""
    from trtls.triage.probe import every_tensor_session

    values = []
    for model in (reference, converted):
        session = every_tensor_session(model)
        names = [o.name for o in session.get_outputs()]
        values.append(dict(zip(names, session.run(names, feed), strict=True)))
    return compare_values(graph_order(reference), values[0], values[1], rtol, output_tolerances)


@dataclass
class OrderedNode:
    """A node as the comparator reads it (onnx_graphsurgeon's shape: `name`, `op`, `outputs[i].name`)."""

    name: str
    op: str
    outputs: list[Any]


@dataclass
class OrderedTensor:
    name: str


@dataclass
class OrderedGraph:
    nodes: list[OrderedNode]
    outputs: list[OrderedTensor]


def graph_order(model: Any) -> OrderedGraph:
    """`model`'s nodes in a topological order, read with onnx alone (`subgraph.load_graph`): comparing two given
    models needs neither ModelOpt nor onnx_graphsurgeon."""
    from trtls.triage.subgraph import load_graph

    g = load_graph(model)
    nodes = [OrderedNode(n.name, n.op_type, [OrderedTensor(o) for o in n.output if o]) for n in g.nodes]
    return OrderedGraph(nodes, [OrderedTensor(o) for o in g.outputs])


def upstream(model: Any, nodes: list[str]) -> list[str]:
    """The named nodes that make what `nodes` read (one level up, in graph order): an exclusion widened upstream."""
    from trtls.triage.subgraph import load_graph

    g = load_graph(model)
    wanted = set(nodes)
    makers = {g.producer[t] for k, n in enumerate(g.nodes) if n.name in wanted for t in g.reads[k] if t in g.producer}
    return [g.nodes[k].name for k in sorted(makers) if g.nodes[k].name and g.nodes[k].name not in wanted]


def compare_values(
    graph: Any,
    ref: dict[str, Any],
    got: dict[str, Any],
    rtol: float,
    output_tolerances: dict[str, tuple[float, float]],
) -> Comparison:
    """The comparator: every float tensor both runs hold (by name), in the reference graph's (toposorted,
    onnx_graphsurgeon) order, judged by the rule. Shared by the ONNX Runtime search and the TensorRT engine's
    layer-wise comparison (`trt_layers`)."""
    outputs = {t.name for t in graph.outputs}
    result = Comparison()
    for node in graph.nodes:
        for t in node.outputs:
            a, b = ref.get(t.name), got.get(t.name)
            if a is None or b is None or not np.issubdtype(np.asarray(a).dtype, np.floating):
                continue
            a, b = np.asarray(a), np.asarray(b)
            if a.shape != b.shape:
                continue
            max_abs, range_error, rel_l2, bad = _error(a, b)
            finite = np.isfinite(a)
            not_compared = int(a.size - np.count_nonzero(finite))
            within: bool | None = bad == 0 and range_error <= rtol
            if t.name in outputs and t.name in output_tolerances:  # elementwise too, with the tolerances given for it
                atol_o, rtol_o = output_tolerances[t.name]
                a_f, b_f = a[finite].astype(np.float64), b[finite].astype(np.float64)
                within = within and bool(np.all(np.abs(b_f - a_f) <= atol_o + rtol_o * np.abs(a_f)))
            if not_compared == a.size:  # no finite reference element: nothing was compared, so nothing passed
                within = None
            if t.name in outputs:
                result.output_errors[t.name] = max_abs  # inf when it overflowed: standard_json makes it null
                result.output_range_error = max(result.output_range_error, range_error)
                result.outputs_pass = result.outputs_pass and within is not False
                if within is None:
                    result.outputs_not_checked.append(t.name)
            error = TensorError(t.name, node.name, node.op, max_abs, range_error, rel_l2, bad, within, not_compared)
            result.tensors.append(error)
    compared = {t.tensor for t in result.tensors}
    for t in graph.outputs:  # a float output the other side lacks, or makes in another shape: nothing was measured
        a = ref.get(t.name)
        if a is not None and np.issubdtype(np.asarray(a).dtype, np.floating) and t.name not in compared:
            result.outputs_not_checked.append(t.name)
    return result


def random_feed(model: Any, profiles: list[dict[str, Any]], seed: int = 0) -> dict[str, np.ndarray]:
    """Inputs at the first profile's opt shapes, seeded (used when the caller gives none; the evidence says so)."""
    from trtls.triage.probe import _feed, model_inputs

    inputs = model_inputs(model)
    return _feed(inputs, (profiles or [{"inputs": []}])[0], "opt", np.random.default_rng(seed))


@dataclass
class Divergence:
    rounds: list[dict[str, Any]] = field(default_factory=list)
    excluded: list[str] = field(default_factory=list)
    fixed: bool | None = None  # None: no fix asked
    widened: list[str] = field(default_factory=list)  # nodes excluded by widening upstream, not as a first divergence


def find_divergence(
    reference_path: Path,
    convert: Any,
    spec: dict[str, Any],
    feed: dict[str, np.ndarray],
    rtol: float,
    output_tolerances: dict[str, tuple[float, float]],
    fix: bool,
    stop: Any = lambda: False,
    report: Any = lambda text: None,
) -> Divergence:
    """Compare the reference with its conversion (`convert(spec) -> Path`, or None when a stop ended it); with
    `fix`, exclude the first diverging node and convert again, round by round, until the outputs pass (or
    MAX_FIX_ROUNDS). A round whose exclusion left the outputs' worst range error no lower than the round before it
    widens the exclusion upstream (`upstream`) instead of adding the next diverging node; each round records why its
    nodes were excluded (`reason`: first_diverging | widened_upstream) and whether its outputs did worse
    (`worseThanBefore`). `stop()` is read before each conversion and each comparison; `report(text)` is told each
    comparison as it starts (the editor's progress)."""

    reference = load_onnx(reference_path)
    out = Divergence(fixed=False if fix else None)
    excluded = list(spec.get("exclude_nodes") or [])
    before: float | None = None  # the outputs' error before the exclusion now being tried
    added: list[str] = []  # the nodes the current round excludes beyond the round `before` measured
    reason = "recipe"
    for index in range(MAX_FIX_ROUNDS if fix else 1):
        if stop():
            out.fixed = None  # the stop came before an exclusion was measured to pass or not: not checked
            break
        converted_path = convert({**spec, "exclude_nodes": excluded})
        if converted_path is None or stop():  # the conversion was stopped, or a stop came while it ran
            out.fixed = None
            break
        report(f"round {index + 1}: comparing every tensor" + (f" (exclude_nodes = {excluded})" if excluded else ""))
        comp = compare(reference, load_onnx(converted_path), feed, rtol, output_tolerances)
        first = comp.first
        no_better = bool(before is not None and added and not comp.outputs_pass and comp.output_range_error >= before)
        out.rounds.append(
            {
                "excludeNodes": list(excluded),
                "reason": reason,
                "added": list(added),
                "convertedModel": str(converted_path),
                "outputErrors": comp.output_errors,
                "outputRangeError": comp.output_range_error,
                "worseThanBefore": bool(before is not None and added and comp.output_range_error > before),
                **comp.verdict(),
            }
        )
        if comp.outputs_pass or first is None:
            # fixed only when every output was compared: an output with no finite reference value is not_checked
            out.fixed = (True if comp.outputs_checked_pass else None) if fix else None
            break
        if no_better:  # excluding `added` did not help: what it reads was already damaged upstream
            wider = upstream(reference, added)
            if not wider:
                break
            added, reason = wider, "widened_upstream"
            out.widened += wider
            excluded += wider
            continue
        if first.node in excluded or not first.node:
            break  # excluding it did not help, or it has no name to exclude: say so instead of looping
        before, added, reason = comp.output_range_error, [first.node], "first_diverging"
        excluded.append(first.node)
    out.excluded = out.rounds[-1]["excludeNodes"] if out.rounds else excluded
    return out
