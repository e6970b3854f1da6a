"""The route-table keys for a route's life after its gates: the canary plan a promotion carries, the revalidation
triggers (`revalidate_after_days`, `revalidate_on`), and the runbook's hold reasons (plugin libraries, integration
boundaries, tolerance precision, portability targets). `core.route.RouteModel` holds them; gates and
`gates.lifecycle` judge them.

The drift kinds are the names `revalidate_on` takes: what a verdict rests on that can change under a promoted route.
What was promoted itself (the bundle, the checkpoint's revision and its lock) always counts and is not listed.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, field_validator

from trtls.core.validation import RECIPE_TABLE, either_error

DriftKind = Literal[
    "builder",
    "cuda_driver",
    "cuda_runtime",
    "gpu",
    "onnxruntime",
    "python",
    "trtls",
    "recipe",
    "tolerances",
    "thresholds",
]
DRIFT_KINDS: tuple[str, ...] = get_args(DriftKind)  # the Literal is the one list
ALWAYS_COUNTS: tuple[str, ...] = (
    "bundle",
    "checkpoint",
    "lock",
    "rollback_artifact",
)  # what was promoted: never drifts
# Route keys that describe the route's life, not what the gates measured: changing them is not a drift.
LIFECYCLE_KEYS: tuple[str, ...] = ("canary_plan", "revalidate_after_days", "revalidate_on")

Precision = Literal["fp32", "tf32", "fp16", "bf16", "int8"]


class _Model(BaseModel):
    # the recipe's strict tables (`stages = ["10"]` is a located TRT102, not 10), and a nan threshold judges nothing
    model_config = RECIPE_TABLE


Comparison = Literal[">", ">=", "<", "<="]
Unit = Literal["%", "ms", "s"]
_OPS = {"≥": ">=", "≤": "<=", "=>": ">=", "=<": "<="}
_CONDITION = re.compile(
    r"^\s*(?P<metric>[A-Za-z][A-Za-z0-9_ ]*?)\s*(?P<op>>=|<=|=>|=<|≥|≤|>|<)\s*"
    r"(?P<number>[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*(?P<unit>%|ms|s)?\s*$"
)


class AbortRule(_Model):
    """One condition that aborts the canary: `metric comparison threshold [unit]`, e.g. error_rate > 0.1 %."""

    metric: str = Field(pattern=r"^[A-Za-z][A-Za-z0-9_]*$", description="The figure it reads, e.g. `p95_ms`.")
    comparison: Comparison = Field(description="How the figure is compared with the threshold (`>` aborts above).")
    threshold: float = Field(description="The threshold, in `unit`.")
    unit: Unit | None = Field(None, description="`%`, `ms` or `s`; a figure without a unit is read in this one.")

    def text(self) -> str:
        unit = f" {self.unit}" if self.unit else ""
        return f"{self.metric} {self.comparison} {self.threshold:g}{unit}"


def parse_abort_if(text: str) -> list[AbortRule]:
    """The rules of a free-text `abort_if` ("error rate > 0.1 % or p95 > 20 ms"): conditions joined by `or` (any one
    aborts), each `METRIC OP NUMBER [UNIT]`. A metric written in words becomes a name (`error rate` → error_rate);
    a time unit is added to a metric that lacks it (`p95 > 20 ms` → p95_ms), and a metric named with one gives the
    threshold its unit (`p95_ms > 50` is 50 ms). ValueError names the condition it
    cannot read and where it starts."""
    rules: list[AbortRule] = []
    at = 0
    for part in re.split(r"(\bor\b|\|\||;|,)", text):
        if part in ("or", "||", ";", ","):
            at += len(part)
            continue
        where = at + len(part) - len(part.lstrip())
        at += len(part)
        if not part.strip():
            raise ValueError(f"abort_if: an empty condition at character {where + 1} of {text!r}")
        if re.search(r"\band\b|&&", part):
            raise ValueError(
                f"abort_if: {part.strip()!r} (character {where + 1}): conditions are joined by `or` only (any one "
                "aborts): `and` cannot be written as abort rules"
            )
        m = _CONDITION.match(part)
        if m is None:
            raise ValueError(
                f"abort_if: cannot read {part.strip()!r} (character {where + 1} of {text!r}): write METRIC > NUMBER "
                "[UNIT], e.g. `error_rate > 0.1 %` or `p95_ms > 50`, joined by `or`"
            )
        metric = re.sub(r"\s+", "_", m["metric"].strip().lower())
        unit = m["unit"]
        if unit in ("ms", "s") and not metric.endswith(f"_{unit}"):
            metric = f"{metric}_{unit}"
        if unit is None:  # `p95_ms > 50`: the name says the unit
            unit = next((u for u in ("ms", "s") if metric.endswith(f"_{u}")), None)
        op = _OPS.get(m["op"], m["op"])
        rules.append(AbortRule(metric=metric, comparison=op, threshold=float(m["number"]), unit=unit))
    return rules


def _abort_if_in_words_too(schema: dict[str, Any]) -> None:
    """The recipe's schema accepts what the model reads: `abort_if` as rule tables or as the same in words."""
    rules = schema["properties"]["abort_if"]
    words = {
        "type": "string",
        "minLength": 1,
        "description": "The rules in words, e.g. `error_rate > 0.1 % or p95_ms > 50`.",
    }
    schema["properties"]["abort_if"] = {
        "anyOf": [{k: v for k, v in rules.items() if k not in ("description", "title")}, words],
        "title": rules.get("title", "Abort If"),
        "description": rules.get("description", ""),
    }


class CanaryPlan(_Model):
    """How the promoted bundle meets real traffic: `trtls route promote` records it; `trtls route canary` follows it."""

    model_config = RECIPE_TABLE | ConfigDict(json_schema_extra=_abort_if_in_words_too)

    stages: list[Annotated[float, Field(gt=0, le=100)]] = Field(
        min_length=1, description="Traffic percentages in order, e.g. [1, 10, 100] (each > 0 and ≤ 100)."
    )
    abort_if: list[AbortRule] = Field(
        min_length=1,
        description="The conditions that fail the canary (any one): a list of `{ metric, comparison, threshold, "
        "unit }` tables, or the same in words, e.g. `error_rate > 0.1 % or p95_ms > 50 ms` (read into rules; a "
        "condition that cannot be read is a located error). `trtls route canary … pass` with a figure that breaks "
        "one is refused.",
    )
    watch: list[str] = Field(
        default_factory=list,
        description='Figures the canary reports when it ends (`--figure NAME=VALUE` for each), e.g. ["p95_ms", '
        '"error_rate"].',
    )
    owner: str | None = Field(None, description="Who runs the canary (team or person).")

    @field_validator("abort_if", mode="before")
    @classmethod
    def _words_to_rules(cls, value: Any) -> Any:
        if isinstance(value, str):
            return parse_abort_if(value)
        if not isinstance(value, list):
            raise either_error("an array of rule tables or the rules in words (a string)")
        return value

    @property
    def needed(self) -> list[str]:
        """Every figure the canary must report when it ends: the watched ones and each rule's metric."""
        return list(dict.fromkeys([*self.watch, *(r.metric for r in self.abort_if)]))


class PluginLibrary(_Model):
    """A plugin library (custom kernels) the engine loads: what it takes to trust it."""

    path: str = Field(description="The library file (.so), relative to this recipe; its sha256 is gate 3 evidence.")
    source: str | None = Field(
        None, description="Where its source is: repository URL and commit. Unset holds the route."
    )
    build_flags: str | None = Field(
        None, description="How it was built (compiler, flags, CUDA arch list). Unset holds the route."
    )
    version: str | None = Field(None, description="Its version. Unset holds the route.")
    review: str | None = Field(
        None, description="Review status, e.g. `reviewed by A. Person on 2026-11-02`. Unset holds the route."
    )
    scan: str | None = Field(
        None, description="Scan or signature result, e.g. `cosign verified` or `trivy: clean`. Unset holds the route."
    )


class IntegrationBoundary(_Model):
    """An FFI the runtime crosses (TVM-FFI, ctypes, a C ABI): named, with an owner."""

    kind: str = Field(min_length=1, description="The FFI, e.g. `tvm-ffi`, `ctypes`, `c-abi`.")
    owner: str | None = Field(None, description="Who owns the boundary (team or person). Unset holds the route.")
    description: str | None = Field(None, description="What crosses it.")
