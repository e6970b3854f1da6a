"""What a worker says of a build before it builds, as declared models: what builds it (`BuildEnvironment`, made by
builds.worker.adapter.environment_record), the target the engine is built for (`BuildTarget`, made by
core.build_target.build_target) and the parsed network's typing (`NetworkTyping`, made by
builds.build_facts.network_types). The worker's `environment` line and `build_started.environment`, `.target` and
`.network` (core.events), and the state's `environment`, `target` and `network` (core.build_state.BuildState) are
these models, so a reader takes `network.layers`, not `network.get("layers")`, and a renamed key is a type error, not
a silent `None`.

The worker builds them as plain dicts (it never imports pydantic: tests/test_layers.py), the target and the typing
typed for mypy as the `TypedDict`s below (`BuildTargetRecord`, `NetworkTypingRecord`: the same keys as the models,
checked by tests/core/test_build_records.py); they are validated once, at the supervisor's edge
(core.events.parse_event), like every other field of the line; `worker --probe`'s environment too
(builds.supervisor.build_end.probe_environment).

Strict where declared: a known key with the wrong type (`deviceComputeCapability: 8.9`, `inputs` a list,
`is_rtx: "yes"`) is refused at the edge, said with its field (`build_started.target.deviceComputeCapability`). Open
beyond that (`extra="allow"`): a key an older or an external worker adds is kept and written back unchanged. Every
key is optional (an external worker may send some, or none: `{}`). A record dumps as the keys it was given, no more:
a key it never had is not written as `null`, so summary.json and the wire stay what they were before these models:
declared keys in the order the model declares them (the order the worker writes them), then the undeclared ones.
The same rules as core.failure_record.Failure.
"""

from __future__ import annotations

from typing import Any, TypedDict

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer


class _GivenKeys(BaseModel):
    """A worker's JSON record: declared keys typed, undeclared ones kept, dumped as the keys it was given."""

    model_config = ConfigDict(extra="allow", frozen=True, strict=True)

    @model_serializer(mode="wrap")
    def _as_given(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """The keys it was given (set, or undeclared), none it was not: no `null` for a key it never had."""
        out: dict[str, Any] = handler(self)
        given = self.model_fields_set | set(self.__pydantic_extra__ or ())
        return {k: v for k, v in out.items() if k in given}

    def record(self) -> dict[str, Any]:
        """As JSON data: the keys it was given, undeclared ones included (`{}` for a record given none)."""
        return self.model_dump(mode="json")

    @property
    def extra(self) -> dict[str, Any]:
        """The keys no field declares (an older or an external worker's), as sent."""
        return dict(self.__pydantic_extra__ or {})


class BuildEnvironment(_GivenKeys):
    """What builds the engine (builds.worker.adapter.environment_record): the builder module and its version, the
    Python that runs it, the CUDA runtime and driver and device 0, when there is one (null without). `worker --probe`
    adds `capabilities` (kept as sent). Undeclared keys (an older or an external worker's) are kept as sent."""

    module: str | None = Field(None, description='the builder module ("tensorrt_rtx", "tensorrt", an external name)')
    version: str | None = Field(None, description="its version, as the module says it")
    is_rtx: bool | None = Field(None, description="whether it is TensorRT-RTX")
    onnx_parser_version: int | None = Field(None, description="the ONNX parser's version number; null: not said")
    python: str | None = Field(None, description="the worker's Python version")
    python_implementation: str | None = Field(None, description="CPython, PyPy …")
    platform: str | None = Field(None, description="the OS, as platform.platform() says it")
    machine: str | None = Field(None, description="the CPU architecture (x86_64, aarch64)")
    executable: str | None = Field(None, description="the worker's Python executable")
    cuda_runtime: str | None = Field(None, description="the libcudart the loader finds (13.0); null: none")
    cuda_driver: str | None = Field(None, description="the CUDA driver's version; null: no driver")
    device_name: str | None = Field(None, description="device 0's name; null: no device")
    compute_capability: str | None = Field(None, description='device 0\'s compute capability ("8.9"); null: none')
    driver_unanswered: str | None = Field(
        None,
        description="why the CUDA driver's version and device 0 are unknown: its first call (cuInit) had not returned "
        "within the bound the worker waits (builds/cuda.py); absent: the driver answered, or there is none",
    )
    malloc_arena_max: int | None = Field(
        None,
        description="the glibc malloc arena limit the worker set before its first thread; null: left as it was "
        "(today's worker builds on its main thread and sets none; the workers of 2026-12-05 set 1, their builder "
        "thread then sharing the main arena)",
    )
    language: str | None = Field(
        "python", description="the worker's language (an external worker's: cpp); absent: python, the trtls worker"
    )

    @classmethod
    def written(cls, record: dict[str, Any]) -> BuildEnvironment:
        """An environment record this process wrote or validated already: trusted, not validated again."""
        return cls.model_construct(**record)


class BuildTargetRecord(TypedDict, total=False):
    """`BuildTarget` as the worker writes it (core.build_target), for mypy: the worker imports no pydantic."""

    computeCapabilities: list[str] | str
    hardwareCompatibilityLevel: str
    device: str | None
    deviceComputeCapability: str | None


class NetworkTypingRecord(TypedDict, total=False):
    """`NetworkTyping` as the worker writes it (builds.build_facts.network_types), for mypy."""

    stronglyTyped: bool | None
    inputs: dict[str, str]
    outputs: dict[str, str]
    layers: int


class BuildTarget(_GivenKeys):
    """What the engine is built for (core.build_target.build_target): part of the build-config hash, so durations
    measured for one target are never shown as the usual duration on another. Undeclared keys are kept as sent."""

    computeCapabilities: list[str] | str | None = Field(
        None,
        description="the compute capabilities a TensorRT-RTX engine is built for, as the builder config holds them "
        '(["SM89", "SM120"]), or "builder default"',
    )
    hardwareCompatibilityLevel: str | None = Field(
        None, description='the hardware-compatibility level (full TensorRT: "ampere_plus" …), or "builder default"'
    )
    device: str | None = Field(None, description="the GPU the worker saw (device 0's name); null without one")
    deviceComputeCapability: str | None = Field(
        None, description='that GPU\'s compute capability ("8.9"); null without one'
    )

    @classmethod
    def written(cls, record: dict[str, Any]) -> BuildTarget:
        """A target record this process wrote (summary.json's, as just built): trusted, not validated again."""
        return cls.model_construct(**record)


class NetworkTyping(_GivenKeys):
    """The parsed network's typing (builds.build_facts.network_types): strongly typed or not, the dtype of every input
    and output, and its size in layers. Undeclared keys are kept as sent."""

    stronglyTyped: bool | None = Field(
        None, description="whether the network was created STRONGLY_TYPED; null when this TensorRT cannot say"
    )
    inputs: dict[str, str] | None = Field(None, description='input name → TensorRT dtype ("FLOAT", "HALF" …)')
    outputs: dict[str, str] | None = Field(None, description="output name → TensorRT dtype")
    layers: int | None = Field(None, description="the number of layers the parser made")

    @classmethod
    def written(cls, record: dict[str, Any]) -> NetworkTyping:
        """A network record this process wrote (summary.json's, as just built): trusted, not validated again."""
        return cls.model_construct(**record)
