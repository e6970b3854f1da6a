"""The build farm's recipe tables (pure models): `[cluster]`, `[engines.NAME.run_on]`, `[engines.NAME.matrix]`,
and the expansion of a matrix into cells.

A cell is one build: the engine's recipe with some builder settings, profiles or ONNX replaced, written to its
own output (the matrix's `output` template), placed on a node by its `run_on` labels (whose values may use the
same `{axis}` placeholders, so a cell for SM89 lands on the node labelled for SM89). Nothing here imports Ray:
a recipe without `[cluster]` never loads it (tests/farm/test_no_ray_import.py).
"""

from __future__ import annotations

import itertools
import re
import string
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator

from trtls.core.paths import NAME_UNSAFE, safe_name
from trtls.core.profiles import OptimizationProfile
from trtls.core.validation import RECIPE_TABLE, FreeTable

LOCAL = "local"
# Matrix axes that replace one builder setting each; `profiles` and `precision` are handled apart.
SETTING_AXES = (
    "optimization_level",
    "compute_capabilities",
    "tiling_level",
    "max_num_tactics",
    "max_aux_streams",
    "avg_timing_iterations",
    "hardware_compatibility_level",
    "workspace_mib",
)
AXES = (*SETTING_AXES, "profiles", "precision")
PLACEHOLDER_SAFE = NAME_UNSAFE  # kept for importers; names are made safe by core.paths.safe_name


class _Model(BaseModel):
    model_config = RECIPE_TABLE


class ClusterTable(_Model):
    """`[cluster]`: where remote cells run. Without this table every build is local and Ray is never imported."""

    address: str = Field(
        LOCAL,
        description="local: an embedded Ray instance started by trtls (this machine only); auto: the cluster "
        "this machine belongs to (`ray start`); ray://host:port (Ray Client) or host:port (GCS address).",
    )
    runtime_env: FreeTable = Field(
        default_factory=dict, description="Ray runtime environment for the remote workers (pip, env_vars, …)."
    )
    queue_timeout_s: float = Field(
        600.0, gt=0, description="A cell that waits longer than this for a free node fails (TRT231)."
    )
    shared_dir: str | None = Field(
        None,
        description="A folder every node and this machine mount at the same path (NFS, a PVC): nodes write "
        "engines there directly instead of sending them back. Relative to this recipe.",
    )
    keep_warm_s: float = Field(
        30.0,
        ge=0,
        description="Keep a node worker whose cell built this long, for the next cell of the same shape (0: never). "
        "An idle one is released at once when another cell waits for a node.",
    )
    num_cpus: int | None = Field(None, ge=1, description="address = local only: CPUs of the embedded instance.")
    labels: dict[str, str] = Field(
        default_factory=dict, description="address = local only: labels of the embedded instance's node."
    )

    @field_validator("address")
    @classmethod
    def _address(cls, v: str) -> str:
        if v in (LOCAL, "auto") or v.startswith("ray://") or re.fullmatch(r"[\w.\-\[\]:]+:\d+", v):
            return v
        raise ValueError("must be 'local', 'auto', 'ray://host:port' or 'host:port'")


class RunOn(_Model):
    """`[engines.NAME.run_on]`: which nodes may build this engine, and what one build holds there."""

    labels: dict[str, str] = Field(
        default_factory=dict,
        description='Node labels the build needs, e.g. {"ray.io/accelerator-type" = "L4"}; values may use the '
        "matrix's {axis} placeholders.",
    )
    num_gpus: float | Literal["auto"] = Field(
        "auto",
        description="GPUs one build holds. auto follows the builder: 0 for TensorRT-RTX (it builds ahead of time "
        "and uses no GPU), 1 exclusive GPU for full TensorRT (it times tactics on the GPU; two builds on one GPU "
        "spoil each other's timing). A number asks for exactly that.",
    )
    num_cpus: float = Field(1, gt=0, description="CPUs one build holds (a TensorRT build is mostly single-threaded).")
    memory_mib: int | None = Field(None, ge=1, description="Memory one build holds, MiB (Ray's `memory`).")


class Matrix(_Model):
    """`[engines.NAME.matrix]`: axes whose cross product gives the cells, and where each cell's engine goes."""

    output: str = Field(
        description="Output path template, relative to the recipe: {engine}, {cell} and the axis names, "
        'e.g. "build/{engine}-{compute_capabilities}-o{optimization_level}.engine".'
    )
    optimization_level: list[int] | None = Field(None, description="Builder optimization levels (0–5).")
    compute_capabilities: list[str | list[str]] | None = Field(
        None, description='Target compute capabilities, one cell each: ["SM89", "SM120"] (a list = one cell for many).'
    )
    tiling_level: list[Literal["none", "fast", "moderate", "full"]] | None = None
    max_num_tactics: list[int] | None = None
    max_aux_streams: list[int] | None = None
    avg_timing_iterations: list[int] | None = None
    hardware_compatibility_level: list[Literal["none", "ampere_plus", "same_compute_capability"]] | None = None
    workspace_mib: list[int] | None = None
    profiles: dict[str, list[dict[str, Any]]] | None = Field(
        None, description="Named profile variants: {small = [{input=…, min=…, opt=…, max=…}], large = […]}."
    )
    precision: dict[str, str] | None = Field(
        None,
        description='Precision variants as ONNX files ({fp16 = "models/m-fp16.onnx", fp32 = …}): TensorRT-RTX '
        "networks are strongly typed, so a precision is a network, not a builder flag.",
    )


@dataclass(frozen=True)
class GpuChoice:
    """How many GPUs one farm build holds, and the sentence that says why (the cell's line and its evidence)."""

    num_gpus: float
    why: str


def gpu_choice(requested: float | str, builder: str | None, gpu_nodes: bool) -> GpuChoice:
    """The one rule for `run_on.num_gpus`. `builder` is the module the node's worker will import ("tensorrt_rtx",
    "tensorrt"), None when it is not known here (an external worker command); `gpu_nodes`: some node that may hold
    the cell has a GPU.

    An ahead-of-time TensorRT-RTX build uses no GPU (its own log says `GPU 0 MiB`): holding one would queue every
    such build behind the node's GPU count — measured on a 16-core host with one H200, 16 cells ran one at a time.
    Full TensorRT times tactics on the GPU, so a build holds a whole one (two on one GPU spoil each other's timing)."""
    if requested != "auto":
        n = float(requested)
        return GpuChoice(n, f"num_gpus = {n:g} as the recipe asks")
    if builder == "tensorrt_rtx":
        return GpuChoice(0.0, "auto → 0 GPUs: TensorRT-RTX builds ahead of time and uses no GPU")
    if builder == "tensorrt":
        return GpuChoice(1.0, "auto → 1 exclusive GPU: full TensorRT times tactics on the GPU")
    if gpu_nodes:
        return GpuChoice(1.0, "auto → 1 exclusive GPU: the builder is not known here (external worker), a GPU is held")
    return GpuChoice(0.0, "auto → 0 GPUs: the builder is not known here (external worker) and no node has a GPU")


@dataclass(frozen=True)
class Cell:
    """One build of a matrix: `values` is the axis → value choice (display form), `overrides` goes to the
    supervisor's `worker_job`."""

    engine: str
    name: str  # e.g. "SM89-o0" (unique inside the engine)
    values: dict[str, Any]
    output: str  # relative to the recipe
    overrides: dict[str, Any] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return f"{self.engine}/{self.name}"


def _display(axis: str, value: Any) -> str:
    if isinstance(value, list):
        value = "+".join(str(v) for v in value)
    text = str(value)
    if axis == "optimization_level":
        text = f"o{text}"
    return safe_name(text)  # every name that becomes a path goes through the one sanitiser


def axes_of(matrix: Matrix) -> list[tuple[str, list[Any]]]:
    """(axis, choices) in a stable order; a choice of `profiles`/`precision` is its variant name."""
    out: list[tuple[str, list[Any]]] = []
    for axis in AXES:
        values = getattr(matrix, axis)
        if values is None:
            continue
        out.append((axis, list(values.keys()) if isinstance(values, dict) else list(values)))
    return out


def template_fields(template: str) -> list[str]:
    """Placeholder names in a `{name}` template; raises ValueError for a malformed one."""
    return [name for _, name, _, _ in string.Formatter().parse(template) if name is not None]


def fill(template: str, values: dict[str, str]) -> str:
    return template.format_map(values)


def expand(engine: str, matrix: Matrix, run_on: RunOn | None) -> list[Cell]:
    """The cells of one engine's matrix, in axis order (the first axis varies slowest)."""
    axes = axes_of(matrix)
    cells: list[Cell] = []
    for combo in itertools.product(*(choices for _, choices in axes)):
        values = dict(zip((a for a, _ in axes), combo, strict=False))
        shown = {a: _display(a, v) if a not in ("profiles", "precision") else safe_name(v) for a, v in values.items()}
        name = safe_name("-".join(shown.values()) or "default")
        names = {"engine": engine, "cell": name, **shown}
        settings: dict[str, Any] = {}
        overrides: dict[str, Any] = {"settings": settings, "output": fill(matrix.output, names)}
        for axis, value in values.items():
            if axis == "compute_capabilities":
                settings[axis] = value if isinstance(value, list) else [value]
            elif axis in SETTING_AXES:
                settings[axis] = value
            elif axis == "profiles":
                assert matrix.profiles is not None

                overrides["profiles"] = [OptimizationProfile.model_validate(p).job() for p in matrix.profiles[value]]
            elif axis == "precision":
                assert matrix.precision is not None
                overrides["onnx"] = matrix.precision[value]
        labels = {k: fill(v, names) for k, v in (run_on.labels if run_on else {}).items()}
        cells.append(Cell(engine, name, shown, overrides["output"], overrides, labels))
    return cells
