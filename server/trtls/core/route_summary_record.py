"""A route's gates-run record (`.trtls/routes/<route>/summary.json`, format `trtls.route-summary/1`) as a declared
model, shared by the faces that read it: the gates that write it (gates.run), `trtls gates` (cli.gates), the route
page (report.route_page), promotion (gates.lifecycle.promotion, which reads `complete-summary.json`, the same record
of the last run of all five gates) and the route's notes (gates.lifecycle.notes).

The record: the route, the decision and why it holds, what was judged (checkpoint, bundle, runtime), the statuses
(validation, canary, rollback), the linked build evidence, every check of every gate (`gates` → "1".."5" → a
`GateRow` → its `CheckRow`s), the waivers, what the verdict rested on, whether the run was complete, and sometimes the
promoted pointer's state (`promotion`) and what `--record-baseline` did (`baseline`).

Permissive like the build's evidence record (core.summary_record.Summary): every field optional, fields not declared
kept (`extra="allow"`), so a record written by an older trtls still loads; `record()` is the JSON it was read with,
key for key and in the same order, so the file written from it is byte for byte the file written before the model
existed (tests/core/test_route_summary_record.py). A check's `evidence` is the gate's own JSON and stays a dict.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, model_validator

from trtls.core.gate_result import CheckStatus, Decision

ROUTE_SUMMARY_FORMAT = "trtls.route-summary/1"
GateStatus = Literal["pass", "hold", "reject", "not_run"]
Number = int | float  # kept as written


class _Ordered(BaseModel):
    """A record part that remembers the order its keys were given in, and writes them back in it (`record()`):
    NaN and infinity as JSON writes them (`NaN`), never turned into null."""

    model_config = ConfigDict(extra="allow", frozen=True, ser_json_inf_nan="constants", populate_by_name=True)

    _key_order: tuple[str, ...] = PrivateAttr(default=())

    @model_validator(mode="wrap")
    @classmethod
    def _keeps_its_key_order(cls, data: Any, handler: Any) -> Any:
        made = handler(data)
        if isinstance(data, dict):
            made._key_order = tuple(data)
        return made

    def record(self) -> dict[str, Any]:
        """The part as JSON data: the keys it was given (undeclared ones included), in the order it had them."""
        return _ordered(self, self.model_dump(mode="json", exclude_unset=True, by_alias=True))


def _ordered(part: object, data: Any) -> Any:
    """`data` (a part's JSON dump) with every model's keys in the order that model was given them."""
    if isinstance(part, _Ordered) and isinstance(data, dict):
        extra = part.__pydantic_extra__ or {}
        names: dict[str, str] = {(f.alias or n): n for n, f in type(part).model_fields.items()}
        for key in data:
            value = extra[key] if key in extra else getattr(part, names.get(key) or str(key), None)
            data[key] = _ordered(value, data[key])
        first = {k: data[k] for k in part._key_order if k in data}
        return first | data if len(first) < len(data) else first
    if isinstance(part, list) and isinstance(data, list) and len(part) == len(data):
        return [_ordered(p, d) for p, d in zip(part, data, strict=True)]
    if isinstance(part, dict) and isinstance(data, dict):
        return {k: _ordered(part.get(k), v) for k, v in data.items()}
    return data


class CheckRow(_Ordered):
    """One check as the record lists it: `waived` only on a not_checked check the recipe waives."""

    name: str | None = None
    status: CheckStatus | None = None
    waived: str | None = None
    code: str | None = None
    message: str | None = None
    path: list[str | int] = []  # where in the recipe (the TOML path)
    evidence: dict[str, Any] = {}  # the gate's own figures (duration_s, stats, …)


class GateRow(_Ordered):
    """One gate: its name, its status (`not_run`: no check of it ran) and its checks, in the order they ran."""

    name: str | None = None
    status: GateStatus | None = None
    checks: list[CheckRow] = []


class PromotionState(_Ordered):
    """The promoted pointer judged against this run (gates.lifecycle.status.RouteStatus, as its `as_dict` writes it):
    never `decision: reject` beside `promotion: valid` in one output."""

    route: str | None = None
    state: str | None = None  # valid, revalidate, tampered, …
    message: str | None = None
    promoted_bundle: str | None = None  # the pointer's bundle digest
    seq: int | None = Field(None, alias="record")  # the ledger record of the pointer (`record()` is the JSON)
    event: str | None = None
    decision: str | None = None  # the ledger record's (promote, rollback, …), not a gates decision
    approver: str | None = None
    since: str | None = None
    canary: str | None = None
    canary_figures: dict[str, Any] = {}
    reasons: list[str] = []  # why it must be revalidated
    drifts: list[dict[str, Any]] = []
    advice: list[str] = []


class BaselineNote(_Ordered):
    """What `--record-baseline` did (gates.run): recorded with its path, the bundle's sha256 and the measurement, or
    not recorded and why."""

    recorded: bool | None = None
    path: str | None = None
    reason: str | None = None
    bundle_sha256: str | None = None
    measurement: dict[str, Any] | None = None


class RouteSummary(_Ordered):
    """The record of one gates run of one route. Field names are the record's keys, as written."""

    format: str | None = None  # ROUTE_SUMMARY_FORMAT
    route_name: str | None = None
    decision: Decision | None = None  # of the route: supported only when all five gates ran and passed
    hold_reasons: list[str] = []
    gates_decision: Decision | None = None  # of the gates that ran
    gates_run: list[int] = []
    cancelled: bool | None = None
    checkpoint_id: str | None = None
    checkpoint_revision: str | None = None
    checkpoint_revision_pinned: bool | None = None
    bundle_path: str | None = None
    bundle_digest: str | None = None
    runtime_target: str | None = None
    runtime_target_loads_on: dict[str, Any] | None = None  # core.loads_on.LoadsOn.record(); None: ONNX
    deployed_artifact: Any = None
    runtime_under_test: Any = None
    reference_runtime: Any = None
    engine_executed: bool | None = None
    deployed_artifact_executed: bool | None = None
    runtime_note: str | None = None
    validation_status: str | None = None
    canary_status: str | None = None  # the promotion ledger's canary of the promoted bundle
    canary_inputs_status: str | None = None  # gate 5's run on the canary inputs
    rollback_status: str | None = None
    license: Any = None
    intended_use: str | None = None
    checkpoint: dict[str, Any] | None = None  # gate 1's record
    environment: dict[str, Any] | None = None  # what gate 2 saw
    build_evidence: Any = None  # the build record gate 2 linked
    engine_settings: Any = None
    # the key `record`: what gates 3–5 shared (`record()` is the model's JSON, hence the field's name)
    shared: dict[str, Any] | None = Field(None, alias="record")
    gates: dict[str, GateRow] = {}
    recipe: str | None = None
    generatedAt: str | None = None
    waivers: dict[str, dict[str, Any]] = {}
    rested_on: dict[str, Any] | None = None  # what the verdict rested on (gates.lifecycle.rested_on)
    complete: bool | None = None  # all five gates ran, not cancelled: the record promotion reads
    promotion: PromotionState | None = None  # the promoted pointer judged against this run
    baseline: BaselineNote | None = None  # what --record-baseline did

    @classmethod
    def written(cls, record: dict[str, Any]) -> RouteSummary:
        """The record this process just built, as the file will hold it: JSON-encoded as written (`default=str`, so a
        path is its string) and read back, so `record()` is the file's JSON."""
        return cls.model_validate(json.loads(json.dumps(record, default=str)))

    def text(self) -> str:
        """The file's text (summary.json, complete-summary.json, `trtls gates --format json`)."""
        return json.dumps(self.record(), indent=2, default=str) + "\n"

    def gate(self, number: int) -> GateRow | None:
        return self.gates.get(str(number))


def loaded_route_summary(data: object) -> RouteSummary | None:
    """JSON data read from a route's summary as a `RouteSummary`, or None when it is no record (not an object, or
    one that does not hold together): what promotion and the code lens read, as they read any JSON object before."""
    if not isinstance(data, dict):
        return None
    try:
        return RouteSummary.model_validate(data)
    except ValidationError:
        return None


def route_summary_of(data: object) -> RouteSummary | str:
    """JSON data read from a route's summary as a `RouteSummary` (its gates included), or what is wrong with it."""
    if not isinstance(data, dict) or not isinstance(data.get("gates"), dict):
        return "not a route summary"
    try:
        return RouteSummary.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "the record"
        return f"not a route summary: {where}: {first['msg']}"
