"""The build configuration of one engine: builder knobs, precision, plugins (the `[engines.NAME.builder]`,
`[engines.NAME.precision]` and `[engines.NAME.plugins]` tables).

What TensorRT can do depends on the module a worker loads (TensorRT 10.x, TensorRT 11, TensorRT-RTX), which
the editor does not import. So the recipe accepts every key any of them knows; the worker applies each one
and reads it back, and a key the loaded module cannot apply is reported — in the evidence
(`effectiveSettings.not_applied`) and as a located TRT140 on that key — never silently dropped.

`SETTING_PATHS` maps the flat job keys (what the worker receives and reports) back to the TOML keys, so a
report from the worker lands on the key that asked for it. `KEYS` (in `build_config_keys`, re-exported here) is
the table the docs and `trtls import trtexec` share: every key, its trtexec flag, where it applies, and how the
importer reads the flag (`KeyInfo.imports`; the importer has no flag list of its own).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from trtls.core.build_config_keys import KEYS as KEYS
from trtls.core.build_config_keys import KeyInfo as KeyInfo
from trtls.core.build_config_keys import keys_markdown as keys_markdown
from trtls.core.setting_keys import FLAG_KEYS, POOL_KEYS
from trtls.core.validation import RECIPE_TABLE

ComputeCapability = Literal["SM75", "SM80", "SM86", "SM89", "SM120", "SM121", "CURRENT"]
LegacyPrecisionFlag = Literal["fp16", "bf16", "int8", "fp8"]


class _Model(BaseModel):
    model_config = RECIPE_TABLE  # strict: `optimization_level = "3"` is a located TRT102, not 3


class MemoryPoolLimits(_Model):
    """IBuilderConfig memory pools (trtexec --memPoolSize=workspace:…,tacticSharedMem:…,dlaSRAM:…)."""

    workspace_mib: int | None = Field(None, ge=1, description="Builder workspace pool limit, MiB.")
    tactic_dram_mib: int | None = Field(None, ge=1, description="Device memory for tactic timing, MiB.")
    tactic_shared_memory_kib: int | None = Field(
        None, ge=1, description="Shared memory a tactic may use, KiB (a too small value fails the build)."
    )
    dla_managed_sram_mib: int | None = Field(None, ge=1, description="DLA managed SRAM, MiB (DLA builds only).")
    dla_local_dram_mib: int | None = Field(None, ge=1, description="DLA local DRAM, MiB (DLA builds only).")
    dla_global_dram_mib: int | None = Field(None, ge=1, description="DLA global DRAM, MiB (DLA builds only).")


class BuilderSettings(_Model):
    """Builder knobs; the ones that change tactic choice are part of the timing-cache identity.

    Unset (None) means the module's default: nothing is called, so nothing can be reported as not applied.
    """

    optimization_level: int = Field(
        3,
        ge=0,
        le=5,
        description="builder_optimization_level: 0 (fast build, ignores timing caches) to 5 (deepest tactic search).",
    )
    max_aux_streams: int | None = Field(None, ge=0, description="Maximum auxiliary streams per engine.")
    tiling_level: Literal["none", "fast", "moderate", "full"] | None = Field(
        None, description="tiling_optimization_level: how hard the builder searches tiling strategies."
    )
    l2_limit_for_tiling: int | None = Field(
        None, ge=0, description="L2 cache budget (bytes) the tiling optimization may assume."
    )
    max_num_tactics: int | None = Field(
        None, ge=1, description="Cap on tactics timed per layer (fewer = faster build)."
    )
    avg_timing_iterations: int | None = Field(None, ge=1, description="Timing iterations averaged per tactic.")
    hardware_compatibility_level: Literal["none", "ampere_plus", "same_compute_capability"] | None = Field(
        None, description="Engines that run on more GPUs than the one they were built on."
    )
    compute_capabilities: list[ComputeCapability] | None = Field(
        None, description='TensorRT-RTX only: GPU targets to build for (e.g. ["SM89", "SM120"]).'
    )
    memory_pool_limits: MemoryPoolLimits = Field(default_factory=MemoryPoolLimits, description="Memory pool limits.")
    tf32: bool | None = Field(None, description="false: forbid TF32 tactics (BuilderFlag.TF32 cleared).")
    sparse_weights: bool | None = Field(None, description="Allow structured-sparsity tactics (SPARSE_WEIGHTS).")
    refit: Literal["all", "identical", "individual"] | None = Field(
        None,
        description="Refittable engine: all weights (REFIT), weights identical to the build's (REFIT_IDENTICAL), "
        "or the weights marked refittable (REFIT_INDIVIDUAL).",
    )
    strip_weights: bool | None = Field(
        None, description="Strip refittable weights from the plan (STRIP_PLAN); implies refit = 'identical' if unset."
    )
    weight_streaming: bool | None = Field(
        None, description="Allow streaming weights from host memory (WEIGHT_STREAMING)."
    )
    version_compatible: bool | None = Field(
        None, description="Engine that later TensorRT versions can run (VERSION_COMPATIBLE)."
    )
    exclude_lean_runtime: bool | None = Field(
        None, description="With version_compatible: do not embed the lean runtime (EXCLUDE_LEAN_RUNTIME)."
    )
    tactic_sources: list[str] | None = Field(
        None,
        description='Tactic sources to enable ("+NAME" or "NAME") or disable ("-NAME") from the module\'s defaults, '
        'e.g. ["-CUDNN", "+CUBLAS"] or ["-JIT_CONVOLUTIONS"].',
    )
    profiling_verbosity: Literal["layer_names_only", "detailed", "none"] | None = Field(
        None, description="How much layer information the engine keeps for profilers and the inspector."
    )
    dla_core: int | None = Field(None, ge=0, description="Build for this DLA core (default device type DLA).")
    allow_gpu_fallback: bool | None = Field(None, description="With dla_core: layers DLA cannot run go to the GPU.")
    runtime_platform: Literal["same_as_build", "windows_amd64"] | None = Field(
        None, description="Platform the engine will run on (cross-platform builds)."
    )


class PrecisionSettings(_Model):
    """Precision the TensorRT 11 way: in the graph (AutoCast before the build) and a strongly typed network."""

    convert: Literal["fp16", "bf16"] | None = Field(
        None,
        description="Convert the ONNX to mixed precision with NVIDIA ModelOpt AutoCast before the build "
        "(its own phase; the result is cached by content).",
    )
    keep_io_types: bool = Field(True, description="Keep the model's input and output types (AutoCast keep_io_types).")
    exclude_op_types: list[str] = Field(
        default_factory=list, description="Op types kept in FP32 (e.g. LayerNormalization)."
    )
    exclude_nodes: list[str] = Field(
        default_factory=list, description="Node names kept in FP32 (regular expressions, as AutoCast takes them)."
    )
    strongly_typed: bool | None = Field(
        None,
        description="NetworkDefinitionCreationFlag.STRONGLY_TYPED: tensor types come from the graph. "
        "Default: on when `convert` is set.",
    )
    legacy_flags: list[LegacyPrecisionFlag] = Field(
        default_factory=list,
        description="TensorRT 10.x weak typing (BuilderFlag FP16/BF16/INT8/FP8). TensorRT 11 and TensorRT-RTX have "
        "none: use `convert` (fp16/bf16) or Q/DQ nodes (int8/fp8).",
    )


class PluginSettings(_Model):
    """Plugin libraries loaded into the builder (trtexec --staticPlugins / --dynamicPlugins / --plugins)."""

    libraries: list[str] = Field(
        default_factory=list, description="Plugin libraries (.so) to load, relative to this recipe."
    )
    serialize: list[str] = Field(
        default_factory=list,
        description="Libraries to ship inside the engine (plugins_to_serialize; --setPluginsToSerialize); "
        "each must also be in `libraries`.",
    )
    require_creators: list[str] = Field(
        default_factory=list,
        description='Plugin creators that must be registered once the libraries are loaded ("Name" or "Name@version").',
    )


# ---------------------------------------------------------------- flat job keys → TOML keys

assert set(POOL_KEYS) == set(MemoryPoolLimits.model_fields), "core.setting_keys is out of date"
assert set(FLAG_KEYS) <= set(BuilderSettings.model_fields), "core.setting_keys is out of date"

SETTING_PATHS: dict[str, tuple[str, ...]] = {
    **{k: ("builder", k) for k in BuilderSettings.model_fields if k != "memory_pool_limits"},
    **{k: ("builder", "memory_pool_limits", k) for k in POOL_KEYS},
    "strongly_typed": ("precision", "strongly_typed"),
    "legacy_flags": ("precision", "legacy_flags"),
    "convert": ("precision", "convert"),
    "plugins": ("plugins", "libraries"),
    "require_creators": ("plugins", "require_creators"),
    "serialize": ("plugins", "serialize"),
}


def setting_path(engine: str, key: str) -> tuple[str, ...]:
    """The TOML path of a flat setting key (an unknown key lands on the engine table)."""
    return ("engines", engine, *SETTING_PATHS.get(key, ()))


def flat_settings(builder: BuilderSettings) -> dict[str, object]:
    """The `settings` object of a worker job: builder keys and pool keys side by side."""
    settings = builder.model_dump(exclude={"memory_pool_limits"})
    settings.update(builder.memory_pool_limits.model_dump())
    return settings
