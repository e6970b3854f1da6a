"""Why a build failed, as one declared model: the worker's `build_finished.failure` (core.events.BuildFinished), the
state's `failure` (core.build_state.BuildState), summary.json's `failure` (core.summary_record.Summary) and what
core.builder_errors classifies from the log are all a `Failure`, so a reader takes `failure.layer`, not
`failure.get("layer")`, and a renamed key is a type error, not a silent `None`.

Who writes which keys:

- the worker (builds.worker.build), when it knows why: `{kind: setting|plugin, code, key}` (a recipe key it could not
  apply, a plugin library or creator), `{kind: precision, code, key: "convert", reason}` (the AutoCast step);
- core.builder_errors, from TensorRT's log: `internal_error` (`errorCode`, `message`, `assertion`, `source`, `layer`,
  then `summary` or `function` when the message has them), `out_of_memory` (`resource`, `evidence`,
  `requestedBytes`, `peakRssBytes`, `peakRssHow`, `oomKill`, `keys`, `advice`) and a `setting` the log pins on one
  key (`code`, `key`, `hint`).

Strict where declared: a known key with the wrong type (`errorCode: "2"`) or a kind trtls never wrote is refused at
the supervisor's edge, said with its field (`failure.kind`). Open beyond that (`extra="allow"`): a key an older or
an external worker adds is kept and written back unchanged. A failure dumps as the keys it was given, no more: a key
it never had is not written as `null` (summary.json and the wire stay what they were before this model): declared
keys in the order the model declares them (the order trtls's producers write them), then the undeclared ones.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer

FailureKind = Literal["setting", "plugin", "precision", "internal_error", "out_of_memory"]
MemoryResource = Literal["workspace_limit", "device_memory", "host_memory", "memory"]


class Failure(BaseModel):
    """Why a build failed, when the worker or trtls knows: its `kind` and what that kind records. Undeclared keys
    (an older or an external worker's) are kept as sent."""

    model_config = ConfigDict(extra="allow", frozen=True, strict=True)

    kind: FailureKind = Field(
        description="what failed: setting (a recipe key the builder could not apply), plugin (a plugin library or "
        "creator), precision (the AutoCast conversion), internal_error (TensorRT's own bug or limit), out_of_memory"
    )
    # a setting, a plugin, the precision step (the worker's own), or a setting the log pins (core.builder_errors)
    code: str | None = Field(None, description="the trtls diagnostic code (TRT141, TRT146, TRT147, TRT149 …)")
    key: str | None = Field(None, description="the flat recipe key it lands on (`legacy_flags`, `convert`)")
    reason: str | None = Field(None, description="precision: why the conversion failed (missing_modelopt …)")
    hint: str | None = Field(None, description="what to change in the recipe, when the log says it")
    # a TensorRT internal error (core.builder_errors.parse_internal_error)
    errorCode: int | None = Field(None, description="internal_error: TensorRT's `Error Code N`")
    message: str | None = Field(None, description="internal_error: TensorRT's error line, as logged")
    assertion: str | None = Field(None, description="internal_error: the assertion or CHECK that failed")
    source: str | None = Field(None, description="internal_error: TensorRT's source file and line (`file.cpp:123`)")
    layer: str | None = Field(None, description="the layer or node the log names, when it names one")
    summary: str | None = Field(None, description="internal_error without an assertion: the message's first sentence")
    function: str | None = Field(None, description="internal_error: the TensorRT function it failed in")
    # memory exhaustion (core.builder_errors.memory_exhaustion)
    resource: MemoryResource | None = Field(None, description="out_of_memory: what ran out")
    evidence: list[str] | None = Field(None, description="out_of_memory: the lines that said so")
    requestedBytes: int | None = Field(None, description="out_of_memory: the allocation TensorRT asked for")
    peakRssBytes: int | None = Field(None, description="out_of_memory: the worker's peak resident memory")
    peakRssHow: str | None = Field(None, description="out_of_memory: how the peak was measured")
    oomKill: bool | None = Field(None, description="out_of_memory: whether the kernel's OOM killer acted")
    keys: list[str] | None = Field(None, description="out_of_memory: the recipe keys a retry should change")
    advice: str | None = Field(None, description="out_of_memory: what a retry should change")

    @model_serializer(mode="wrap")
    def _as_given(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """The keys it was given (set, or undeclared), none it was not: no `null` for a key it never had."""
        out: dict[str, Any] = handler(self)
        given = self.model_fields_set | set(self.__pydantic_extra__ or ())
        return {k: v for k, v in out.items() if k in given}

    @classmethod
    def written(cls, record: dict[str, Any]) -> Failure:
        """A failure record this process wrote (summary.json's, as just built): trusted, not validated again."""
        return cls.model_construct(**record)

    def record(self) -> dict[str, Any]:
        """As JSON data: the keys it was given, undeclared ones included."""
        return self.model_dump(mode="json")

    @property
    def extra(self) -> dict[str, Any]:
        """The keys no field declares (an older or an external worker's), as sent."""
        return dict(self.__pydantic_extra__ or {})
