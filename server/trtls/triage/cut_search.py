"""Where a reduction cuts: the searches over a failing model's node order, each step one real build of a candidate
(`attempt(step, make(i))` → a trial whose `still_fails` says whether the cut kept the failure). `bisect_cut` is
Polygraphy's own `BisectMarker`, so a cut is found in the trials Polygraphy's `debug reduce --mode bisect` spends;
`search_from_end` tries the last node alone and the last two before it bisects (a TensorRT failure is most often one
layer or two)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from trtls.core.triage_records import FailureSignature


async def bisect_cut(attempt: Any, make: Any, count: int, *, invert: bool, step: str) -> int | None:
    from polygraphy.tools.debug.subtool.reduce import BisectMarker

    marker = BisectMarker(count, invert=invert)
    while not marker.stop():
        candidate = make(marker.node_index)
        trial = await attempt(step, candidate)
        # the marker keeps the smallest failing candidate by a size it compares with `count`: the candidate's place
        # in the order (its node count can exceed `count`: the nodes a cut brings along are not bisection points)
        size = count - marker.node_index if invert else marker.node_index + 1
        marker.step(not trial.still_fails, size)
    marker.finish()
    return marker.best_bad_node_index


LAST_NODES = (1, 2)  # the cuts the inputs search tries first: the last node alone, then the last two


async def search_from_end(attempt: Any, make: Any, count: int, *, step: str, last_first: bool = True) -> int | None:
    """The largest start `i` (of `count`) whose cut `make(i)` still fails, the cut from 0 taken as failing (the
    outputs search measured it) and nothing at all as passing; None when no cut measured fails.

    A TensorRT failure is most often one layer or two, and the outputs search ended on one of them: so, with
    `last_first`, the search tries the last node alone, then the last two (`LAST_NODES`), and bisects what is left
    as Polygraphy's `BisectMarker(invert=True)` does. Where the failure is the last node or the last two (on every
    model of the benchmark, docs/performance.md) that is 1 or 2 trials where the bisection spends ⌈log2 count⌉;
    where it needs more, at most 3 trials more than the bisection (counted for every count below 500 and every
    answer: tests/triage/test_reduce_search.py)."""
    bad, good = 0, count  # bad: a start whose cut fails (0: assumed); good: one whose cut passes (count: nothing)
    found, passed, widths = False, False, list(LAST_NODES if last_first else ())
    while good - bad > 1:
        middle = (bad + good + passed) // 2  # the marker's rounding: up after a cut that passed, else down
        width = widths.pop(0) if widths else 0
        probe = count - width if width and count - width > middle else middle
        passed = not (await attempt(step, make(probe))).still_fails
        if passed:
            good = probe
        else:
            bad, found, widths = probe, True, []
    return bad if found else None


def span_ends(graph: Any, compute: list[int], facts: dict[str, Any]) -> list[int]:
    """The nodes an outputs span may end at: an If/Loop/Scan (its body is what TensorRT may fail on, whatever it
    returns) and every node that makes a floating-point tensor (a tensor the probe did not see is kept: no fact, no
    reason to skip it); every compute node when none does."""
    import numpy as np

    def data(tensor: str) -> bool:
        fact = facts.get(tensor)
        return fact is None or bool(np.issubdtype(np.dtype(fact.dtype), np.floating))

    control_flow = ("If", "Loop", "Scan")
    ends = [
        i for i in compute if graph.nodes[i].op_type in control_flow or any(data(t) for t in graph.nodes[i].output if t)
    ]
    return ends or compute


def named_node(graph: Any, compute: list[int], target: FailureSignature | None) -> int | None:
    """The index of the node the failure names (its `layer`, when that is a node of the model and not a `Constant`),
    or None."""
    layer = target.layer if target is not None else None
    if not layer:
        return None
    return next((i for i in compute if graph.nodes[i].name == layer), None)
