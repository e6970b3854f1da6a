"""A canary's figures against its plan's abort rules (`trtls route canary pass|fail --figure NAME=VALUE`): each figure
read in its rule's unit (`figure_value`), each rule judged (`judge_figures`). Used by `lifecycle.status.canary`."""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Sequence
from typing import Any

from trtls.core.route_lifecycle import AbortRule

_TO_UNIT = {("s", "ms"): 1000.0, ("ms", "s"): 0.001}
_NEVER_NEGATIVE = ("%", "ms", "s")  # the units a canary's figures come in: error rates and latencies
_COMPARE = {">": operator.gt, ">=": operator.ge, "<": operator.lt, "<=": operator.le}


def figure_value(raw: Any, unit: str | None) -> float | str:
    """A canary figure in `unit`: a number, or text with its unit ("0.5%", "80ms", "0.08 s"), converted between s
    and ms; the reason when it is neither (a figure without a unit is read in the rule's unit)."""
    if isinstance(raw, bool):
        return f"{raw!r} is not a number"
    if isinstance(raw, (int, float)):
        value, given = float(raw), None
    else:
        m = re.fullmatch(r"\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*(%|ms|s)?\s*", str(raw))
        if m is None:
            return f"{raw!r} is not a number with an optional unit (%, ms, s)"
        value, given = float(m[1]), m[2]
    if not math.isfinite(value):
        return f"{raw!r} is not a finite number"
    if value < 0 and (given or unit) in _NEVER_NEGATIVE:  # a rate or a time a canary measured is never below 0
        return f"{raw!r} is negative: a rate or a time is never below 0"
    if given is None or given == unit:
        return value
    factor = _TO_UNIT.get((given, unit or ""))
    if factor is not None:
        return value * factor
    return f"{raw!r} is in {given}, the rule in {unit or 'no unit'}"


def judge_figures(rules: Sequence[AbortRule], figures: dict[str, Any]) -> list[dict[str, Any]]:
    """Each abort rule against the canary's figures: {rule, figure, value, broken, why}; `broken` is None when the
    figure is missing or cannot be read in the rule's unit (`why` says which)."""
    out = []
    for rule in rules:
        raw = figures.get(rule.metric)
        value = figure_value(raw, rule.unit) if rule.metric in figures else f"{rule.metric} was not given"
        entry: dict[str, Any] = {"rule": rule.text(), "figure": rule.metric, "value": raw}
        if isinstance(value, str):
            entry.update(broken=None, why=f"{rule.metric}: {value}")
        else:
            broken = _COMPARE[rule.comparison](value, rule.threshold)
            unit = f" {rule.unit}" if rule.unit else ""
            entry.update(broken=broken, why=f"{rule.metric} = {value:g}{unit} breaks `{rule.text()}`" if broken else "")
        out.append(entry)
    return out
