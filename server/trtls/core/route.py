"""Route tables (`[routes.NAME]` in `trtls.toml`): one checkpoint → engine → bundle route under test.

A route names a checkpoint (local folder or Hugging Face cache, with id and revision), the engine
recipe that builds it, the environment it must be built in, the bundle it promotes, the runtimes that
are compared, and the thresholds the five gates judge it by. Validation follows the engine recipe's
rules: every problem is a located TRT1xx finding (unknown keys with "did you mean", wrong types,
missing files, undefined engines), so the editor underlines the exact key or value; the checks beyond
the schema live in `core.route_checks`.

Paths are relative to the recipe. Nothing here touches the checkpoint's content: gate 1 does that.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field, TypeAdapter, ValidationError, field_validator, model_validator

from trtls.core.findings import TomlPath
from trtls.core.route_lifecycle import CanaryPlan, DriftKind, IntegrationBoundary, PluginLibrary, Precision
from trtls.core.route_limits import GoldenOutputsRef, Thresholds, Tolerance
from trtls.core.validation import RECIPE_TABLE, FreeTable, either_error, findings_from_validation
from trtls.core.vocabulary import BUILDER_MODULES, BuilderModule

if TYPE_CHECKING:
    from trtls.core.recipe import LoadedRecipe

COMMIT = re.compile(r"^[0-9a-f]{40}$")
# Runtimes gate 4 knows by name; other names are left to gate 4 to judge (it may add options).
KNOWN_RUNTIMES = ("onnxruntime", "onnx.reference", "tensorrt", "tensorrt_rtx", "trtmc")
INDEPENDENT_REFERENCES = ("checkpoint", "golden")  # gate 4 references that do not run the export
DEFAULT_INPUT_SET = "reference"  # the name of the one set a `reference_inputs = "file.npz"` route has
_INPUT_SETS: TypeAdapter[dict[str, str]] = TypeAdapter(dict[str, str])


class _Model(BaseModel):
    model_config = RECIPE_TABLE  # strict: `overwrite = 1`, `max_input_tokens = "512"` are located TRT102s


class CheckpointRef(_Model):
    path: str = Field(
        description="Checkpoint folder, relative to this recipe: a plain folder, a Hugging Face cache repo folder "
        "(`models--org--name`, holding refs/ and snapshots/), or one of its `snapshots/<commit>` folders."
    )
    id: str | None = Field(
        None, description="Hub id, `org/name`; checked against the cache folder name when there is one."
    )
    revision: str = Field(
        min_length=1, description="The exact commit (40 hex digits). A branch name such as `main` holds gate 1."
    )


class EnvironmentPins(_Model):
    """What the route was accepted on; gate 2 compares each pin with what it finds (unset = not pinned)."""

    builder_module: BuilderModule | None = Field(None, description="TensorRT Python module that builds the engine.")
    builder_version: str | None = Field(None, description="Builder version; `10.3` matches 10.3.x (dotted prefix).")
    cuda_runtime: str | None = Field(None, description="CUDA runtime version (dotted prefix match).")
    cuda_driver: str | None = Field(None, description="NVIDIA driver version (dotted prefix match).")
    gpu_name: str | None = Field(None, description="GPU name as the driver reports it, e.g. `NVIDIA GeForce RTX 4090`.")
    compute_capability: str | None = Field(None, description="GPU compute capability, `8.9` or `SM89`.")
    python: str | None = Field(None, description="Python version (dotted prefix match), e.g. `3.11`.")
    onnxruntime: str | None = Field(
        None,
        description="ONNX Runtime version (dotted prefix match), for a route whose runtime target is ONNX Runtime.",
    )


class OnnxConversion(_Model):
    """The precision conversion an ONNX route's deployed model goes through (ModelOpt AutoCast), as an engine's
    `[engines.X.precision]` converts the ONNX a TensorRT engine is built from."""

    convert: Literal["fp16", "bf16"] = Field(
        description="Convert the exported ONNX to mixed precision with NVIDIA ModelOpt AutoCast: the bundle deploys "
        "the converted model; `onnx` stays the unconverted export (cached by content, as an engine's conversion)."
    )
    keep_io_types: bool = Field(True, description="Keep the model's input and output types (AutoCast keep_io_types).")
    exclude_op_types: list[str] = Field(
        default_factory=list, description="Op types kept in FP32 (e.g. LayerNormalization)."
    )
    exclude_nodes: list[str] = Field(
        default_factory=list, description="Node names kept in FP32 (regular expressions, as AutoCast takes them)."
    )


class NoCheckpoint(ValueError):
    """Code that reads a checkpoint was asked to on a route that starts from an export."""


EXPORT_ROUTE_NEEDS = (
    "a route with no `checkpoint` starts from a model shipped as an export: it needs `onnx` (the ONNX file as "
    'shipped, deployed as is), `reference = "golden"` and `golden_outputs` (outputs recorded by whoever ran the '
    "original model: the only reference gate 4 can have without the weights), and no `engine` (an export route "
    "deploys its ONNX on ONNX Runtime); docs/gates.md, 'Models that ship as an export'"
)


class RouteModel(_Model):
    checkpoint: CheckpointRef | None = Field(
        None,
        description="The checkpoint the route starts from. Leave it out for a model that ships only as an export (an "
        'ONNX file with golden outputs): then `onnx` is that file, `reference = "golden"` with `golden_outputs`, and '
        "the gates that read a checkpoint are `not_checked` by name (docs/gates.md, 'Models that ship as an export').",
    )
    tokenizer_files: list[str] = Field(
        default_factory=list,
        description="A route with no `checkpoint`: tokenizer files shipped with the export (e.g. `tokenizer.json`), "
        "relative to this recipe; the bundle carries each under its file name, its sha256 in the provenance.",
    )
    engine: str | None = Field(
        None,
        description="Name of the `[engines.X]` table that builds this route's engine: the route deploys that engine "
        "(runtime target TensorRT). Leave it out, and set `onnx`, for a route that deploys the ONNX model itself "
        "(runtime target ONNX Runtime).",
    )
    onnx: str | None = Field(
        None,
        description="For a route with no `engine`: the ONNX model the route exports and deploys (runtime target ONNX "
        "Runtime), relative to this recipe.",
    )
    overwrite: bool = Field(
        False,
        description="Let `trtls route build` replace a file trtls did not write at the path it exports the ONNX to "
        "(`onnx`, or the engine's `onnx`) or at its `bundle` path. Without it, such a file is never replaced (TRT122) "
        "unless the export is byte-identical; a file a previous route build of this recipe wrote (an export it "
        "recorded, a bundle whose sidecar records it) is replaced either way.",
    )
    precision: OnnxConversion | None = Field(
        None,
        description="For a route with no `engine`: convert the exported ONNX to fp16 or bf16 (ModelOpt AutoCast) and "
        "deploy the converted model; gate 4's `onnx.reference` reference runs the unconverted `onnx`. An engine "
        "route converts in its engine's `[engines.X.precision]`.",
    )
    waive: dict[str, str] = Field(
        default_factory=dict,
        description="Checks this route accepts as `not_checked`, each with the reason (recorded in the evidence): "
        '`{"release.throughput" = "batch job; throughput is not a release criterion"}`. Only a check that did not '
        "run can be waived; a hold or a reject never is. Check names: docs/gates.md.",
    )
    intended_use: str = Field(
        min_length=1,
        description="What the model will be used for (recorded with the licence review and the promotion). Required "
        "for every route, an export's too: no file can say what a deployment is for.",
    )
    allowed_licenses: list[str] = Field(
        min_length=1,
        description='Licence ids (model card `license:`) this use allows, e.g. ["apache-2.0", "mit"]. Required for '
        "every route: gate 1 compares the model card's licence with it; an export has no model card, so there it "
        "records the review and gate 1's `license` is `not_checked`.",
    )
    allow_pickle: bool = Field(
        False,
        description="Accept pickle weights (.bin/.pt/.pkl/.pth). They are never unpickled either way.",
    )
    environment: EnvironmentPins = Field(default_factory=EnvironmentPins, description="Environment pins (gate 2).")
    bundle: str = Field(description="The `.bundle` this route promotes, relative to this recipe.")
    runtime: str = Field("onnxruntime", min_length=1, description="Runtime under test (gate 4).")
    reference: str = Field(
        "checkpoint",
        min_length=1,
        description="Gate 4's reference, independent of the export: `checkpoint` (a numpy forward pass from the "
        "checkpoint's safetensors weights, for the families trtls knows), `golden` (outputs recorded elsewhere: "
        "`golden_outputs`), or a runtime name (`onnx.reference`, …), which runs the same exported ONNX as the runtime "
        "under test and so cannot see an export bug (TRT812 stays not_checked).",
    )
    golden_outputs: GoldenOutputsRef | None = Field(
        None, description='With `reference = "golden"`: the recorded reference outputs and their provenance.'
    )
    runtime_options: FreeTable = Field(
        default_factory=dict,
        description="Options for the runtime under test, passed to gate 4's runtime_spec (e.g. threads, timeout_s, "
        "command; "
        "perturb > 0 is FAULT INJECTION, for the failing sample only, and always holds the route).",
    )
    reference_inputs: str | dict[str, str] | None = Field(
        None,
        description="Reference inputs (.npz), relative to this recipe: one file, or a table of named input sets "
        '(`{ short = "inputs/short.npz", long = "inputs/long.npz" }`: several shapes, e.g. short and long sequences). '
        "Gate 4 checks parity on every set and records the evidence per set; gate 5 measures on every set. Set "
        "names: letters, digits, '_', '-', '.'.",
    )
    canary_inputs: str | None = Field(None, description="Canary inputs (.npz), relative to this recipe (gate 5).")
    tolerances: dict[str, Tolerance] = Field(
        default_factory=dict, description="Tolerances per output name; `*` applies to outputs not named."
    )
    thresholds: Thresholds = Field(default_factory=Thresholds, description="Latency and memory thresholds (gate 5).")
    previous_bundle: str | None = Field(
        None, description="The bundle to roll back to (gate 5), relative to this recipe."
    )
    bundle_format: Literal["trtls", "trtmc"] = Field(
        "trtls",
        description='The bundle layout `trtls route build` writes. `"trtls"` (default): sections `engine`, '
        "`model.onnx`, the checkpoint's `config.json`, `tokenizer.json` and its deployment files with `/` written as "
        '`__`. `"trtmc"`: a bundle TensorRT Model Connect\'s native runtime loads: the engine as `engine_plan`, a '
        "generated `config.json` dispatch record (registered `runtime_strategy`, `engine_backend`, `trt_version` and "
        "`trt_abi` as major.minor), the tokenizer and sentence-transformers files under their own names. Engine "
        "routes only, for model types TRTMC registers a strategy for (bert).",
    )
    max_input_tokens: int | None = Field(
        None,
        gt=0,
        description='With `bundle_format = "trtmc"`: the longest request, in tokens, the service in front of TRTMC\'s '
        "runtime lets through (it truncates or refuses longer ones; TRTMC itself never does). Needed when the engine's "
        "profile stops short of the model's max_position_embeddings; at most the profile's max (gate 3, TRT702).",
    )
    tokenizer_texts: list[str] | None = Field(
        None,
        min_length=1,
        description="Texts for gate 4's tokenizer parity (TRT806): each is tokenized with the checkpoint's "
        "tokenizer.json "
        "(reference) and with the copy the bundle carries (what the runtime gets); the token ids must be identical. "
        "Unset: no tokenizer check.",
    )
    canary_plan: CanaryPlan | None = Field(
        None, description="How a promoted bundle meets traffic (`trtls route promote` requires it; docs/gates.md)."
    )
    revalidate_after_days: int | None = Field(
        None, gt=0, description="A promotion older than this many days must be revalidated (`trtls route status`)."
    )
    revalidate_on: list[DriftKind] | None = Field(
        None,
        description="Which drifts under a promoted route make it `revalidate` (default: every kind). The bundle, "
        "checkpoint revision and lock always count.",
    )
    plugins: dict[str, PluginLibrary] = Field(
        default_factory=dict, description="Plugin libraries the engine loads, each with its provenance (TRT710)."
    )
    boundaries: dict[str, IntegrationBoundary] = Field(
        default_factory=dict, description="FFI boundaries the runtime crosses, each named with an owner (TRT609)."
    )
    ffi: list[str] = Field(
        default_factory=list,
        description='FFIs the runtime is known to cross (e.g. ["tvm-ffi"]): each must be a `boundaries` entry.',
    )
    tolerance_precision: Precision | None = Field(
        None,
        description="The precision `tolerances` were set for; a deployed artifact in another precision than the "
        "checkpoint's holds until this names it (TRT813; presets in docs/gates.md).",
    )
    targets: list[str] = Field(
        default_factory=list,
        description="GPUs the route is meant for (names as the driver reports them, or `SM89`): each not validated "
        "holds (TRT911).",
    )

    @model_validator(mode="after")
    def _export_route(self) -> RouteModel:
        if self.checkpoint is None and (
            self.onnx is None or self.engine is not None or self.reference != "golden" or self.golden_outputs is None
        ):
            raise ValueError(EXPORT_ROUTE_NEEDS)
        if self.checkpoint is not None and self.tokenizer_files:
            raise ValueError("tokenizer_files is for a route with no checkpoint (a checkpoint's own files are read)")
        return self

    def source_checkpoint(self) -> CheckpointRef:
        """The checkpoint, for the code that reads one (gate 1, the lock, the route build's checkpoint read);
        NoCheckpoint for a route that starts from an export, which none of them runs on."""
        if self.checkpoint is None:
            raise NoCheckpoint("the route starts from an export (no checkpoint): there is no checkpoint to read")
        return self.checkpoint

    @property
    def from_export(self) -> bool:
        """Whether the route starts from a model shipped as an export (no checkpoint: docs/gates.md)."""
        return self.checkpoint is None

    @field_validator("reference_inputs", mode="wrap")
    @classmethod
    def _input_sets(cls, value: Any, handler: Any) -> Any:
        """One .npz path, or a table of named sets (a wrong value inside the table is located at its set)."""
        if isinstance(value, dict):
            if not value:
                raise ValueError('an empty table names no input set: give { name = "file.npz", ... } or one path')
            return _INPUT_SETS.validate_python(value)
        if value is None or isinstance(value, str):
            return value
        raise either_error('a .npz path or a table of named input sets { short = "a.npz", long = "b.npz" }')

    @property
    def input_sets(self) -> dict[str, str]:
        """The reference input sets by name, in recipe order: the table as written, or for the one-file form
        `{"reference": path}` (`named_input_sets` tells which); empty when the route has none."""
        if self.reference_inputs is None:
            return {}
        if isinstance(self.reference_inputs, str):
            return {DEFAULT_INPUT_SET: self.reference_inputs}
        return dict(self.reference_inputs)

    @property
    def named_input_sets(self) -> bool:
        """Whether `reference_inputs` is a table of named sets (evidence and messages then name each set)."""
        return isinstance(self.reference_inputs, dict)

    @property
    def revision_pinned(self) -> bool:
        return self.checkpoint is not None and bool(COMMIT.match(self.checkpoint.revision))

    @property
    def deploys(self) -> Literal["engine", "onnx"]:
        """What the route ships to its runtime: the TensorRT engine, or (no `engine`) the ONNX model itself."""
        return "engine" if self.engine is not None else "onnx"

    @property
    def runtime_target(self) -> str:
        """The runtime the deployed artifact is for, as the route summary names it: `onnxruntime` for a route that
        deploys its ONNX; for an engine, the TensorRT flavour that runs it (`tensorrt_rtx` or `tensorrt`: the runtime
        under test when it is one, else the builder pin). `gates.run` prefers the engine table's builder_module."""
        if self.engine is None:
            return "onnxruntime"
        if self.runtime in BUILDER_MODULES:
            return self.runtime
        return self.environment.builder_module or "tensorrt"


def _raw_routes(loaded: LoadedRecipe) -> dict[str, Any]:
    routes = loaded.data.get("routes", {}) if isinstance(loaded.data, dict) else {}
    return routes if isinstance(routes, dict) else {}


def input_set_paths(route: RouteModel, base: TomlPath = ()) -> list[tuple[str, str, TomlPath]]:
    """(set name, path relative to the recipe, TOML key) of every reference input set, in recipe order: the key is
    `reference_inputs` for the one-file form, `reference_inputs.<set>` for a table."""
    key = base + ("reference_inputs",)
    return [(n, rel, key + (n,) if route.named_input_sets else key) for n, rel in route.input_sets.items()]


def export_route_findings(loaded: LoadedRecipe, route: RouteModel, base: TomlPath) -> list[Any]:
    """A route from an export reads the files it names (the ONNX as shipped, its tokenizer files): each must be a
    file (TRT104, located on its key); its ONNX is an input, never exported over."""
    from trtls.core.findings import Finding, Origin, Severity

    out = []
    named = [(str(route.onnx), base + ("onnx",), "the ONNX the export ships")]
    named += [(rel, base + ("tokenizer_files", i), "tokenizer file") for i, rel in enumerate(route.tokenizer_files)]
    for rel, where, what in named:
        path = resolve(loaded, rel)
        if not path.is_file():
            out.append(
                Finding(
                    "TRT104",
                    Severity.error,
                    f"{what} not found: {path}",
                    tuple(where),
                    Origin.recipe,
                    True,
                    {"resolved": str(path)},
                )
            )
    return out


def route_model(loaded: LoadedRecipe, name: str) -> RouteModel:
    """The typed route `name`. KeyError if there is no such table; ValueError if it does not validate."""
    raw = _raw_routes(loaded)
    if name not in raw:
        raise KeyError(name)
    try:
        return RouteModel.model_validate(raw[name])
    except ValidationError as exc:  # said located, as `trtls check` says it (its first five)
        found = findings_from_validation(exc, ("routes", name), RouteModel)[:5]
        said = "; ".join(f"{loaded.location(f)}: {f.code} {f.message}" for f in found)
        raise ValueError(f"route '{name}' is invalid: {said}") from exc


def route_names(loaded: LoadedRecipe) -> list[str]:
    return list(_raw_routes(loaded))


def chosen_routes(loaded: LoadedRecipe, name: str | None, *, none_means_all: bool = False) -> list[str] | str:
    """The routes a command works on: the one named, or — when none is named — the recipe's only route (every route
    with `none_means_all`). A string is the TRT107 message when the choice cannot be made (the faces prefix the
    recipe's path)."""
    names = route_names(loaded)
    listed = ", ".join(names) or "none"
    if name is None:
        if none_means_all and names:
            return names
        if len(names) != 1:
            return f"TRT107 choose a route with --route (routes: {listed})"
        return names
    if name not in names:
        return f"TRT107 no route named {name} (routes: {listed})"
    return [name]


def resolve(loaded: LoadedRecipe, relative: str) -> Path:
    return loaded.resolve(relative)


def route_dir(loaded: Any, route_name: str) -> Path:
    """Where a route's records live: `.trtls/routes/<route>/` beside the recipe."""
    return Path(loaded.base_dir) / ".trtls" / "routes" / route_name
