"""`trtls route build`: a route's checkpoint → ONNX → engine (the build core) → `.bundle` + sidecar + SBOM.

    result = await build_route("samples/route/trtls.toml", "tiny", view=PlainView)   # library API
    trtls route build [RECIPE] --route NAME                                          # CLI

Steps, in order; nothing is promoted unless every step succeeds:

1. **Read the checkpoint as data** (gate 1's `resolve_layout` / `list_files`: contained, symlinks out of it
   refused, nothing imported or unpickled). Every file is hashed (`hashing.hash_files`, digest cache) and
   the files digest is computed exactly as gate 1 computes its lock digest. The files the bundle embeds or
   the exporter reads (config.json, tokenizer.json, *.safetensors) are read once, through one
   `O_NOFOLLOW` descriptor, and their bytes must hash to the recorded digest.
2. **Export ONNX** to the path the route's engine recipe names (`[engines.X].onnx`), atomically, only if
   the bytes differ. Exporters are chosen by config.json `model_type` (`EXPORTERS`): `tiny-mlp` / `mlp`
   = a chain `fc1 … fcN` of Gemm layers with Relu between, from safetensors weights (the sample's
   make_onnx.py, generalised to N layers). Other model types are refused with a message.
3. **Build the engine** through `build.supervisor.Supervisor` (real TensorRT / TensorRT-RTX in a worker
   process): the live phase tree goes to `view(build)`; `on_build(build)` may add listeners or cancel.
4. **Write the bundle** atomically with `bundle.write_bundle`: sections `engine`, `model.onnx`,
   `config.json`, `tokenizer.json`; header model_id, model_type, family, trt_version (builder version from
   the build evidence), trt_abi, gpu_name (or "none (AOT CPU build)"), created_at, precision,
   runtime_strategy, io_map; provenance (header `trtls.provenance` and sidecar) = checkpoint id, revision,
   commit, files digest + per-file sha256, build id, buildConfigHash, builder module + version, ONNX and
   engine sha256. The engine is streamed from one open descriptor and must hash to the build's recorded
   `engineArtifact.sha256`, else nothing is written.
5. **SBOM**: CycloneDX 1.5 beside the bundle, `<bundle>.cdx.json` (`sbom.make_sbom` / `write_sbom`).

Previous bundle (rollback): when the route sets `previous_bundle`, no file exists there yet, and the bundle
path already holds a bundle that verifies, that bundle (with its sidecar and SBOM) is copied atomically to
`previous_bundle` before the new one replaces it. An existing `previous_bundle` is never overwritten (it is
the release you roll back to; move it yourself to promote a newer one). Without `previous_bundle` the old
bundle is simply replaced.

A cancelled, failed, forced or killed build — or any error before the bundle is written — leaves the
existing bundle, sidecar, SBOM and previous bundle untouched (the engine file is protected by the build
core the same way). Each run records `.trtls/routes/<route>/route-build.json`.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from trtls.bundle import CHECK_SECTION_DIGEST, BundleError, BundleProblem, sidecar_path, verify_bundle, write_bundle
from trtls.checkpoint.hashing import DigestCache, default_cache_path, hash_files
from trtls.core.atomic import atomic_write_bytes, atomic_write_text
from trtls.core.recipe import EngineRecipe, LoadedRecipe, load_recipe
from trtls.core.route import COMMIT, RouteModel, route_model
from trtls.gates.source import Layout, list_files, resolve_layout

MAX_EMBED = 64 * 1024 * 1024  # config.json / tokenizer.json read into memory at most this large
MAX_WEIGHTS = 2 * 1024 * 1024 * 1024  # the in-memory exporters refuse larger weight sets
SBOM_SUFFIX = ".cdx.json"
EXIT_BUILT, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_CTRL_C, EXIT_KILLED = 0, 1, 2, 130, 137


class RouteBuildError(Exception):
    """The route cannot be built as asked (bad checkpoint, no exporter, …); nothing was promoted."""

    def __init__(self, message: str, path: tuple[Any, ...] = ()):
        super().__init__(message)
        self.path = path


def sbom_path(bundle: str | os.PathLike[str]) -> Path:
    p = Path(bundle)
    return p.with_name(p.name + SBOM_SUFFIX)


# ------------------------------------------------------------------------------------------- checkpoint


@dataclass
class CheckpointState:
    """What the checkpoint is right now: layout, per-file digests and gate 1's files digest."""

    layout: Layout
    commit: str | None  # what gate 1 records as `commit`
    files: dict[str, dict[str, Any]]  # rel → {sha256, size}  (gate 1's `current`)
    real: dict[str, Path]  # rel → resolved path inside the checkpoint
    files_digest: str  # = gate 1 record["files_digest"]


def files_digest(files: Mapping[str, Mapping[str, Any]]) -> str:
    """The digest gate 1 records as `files_digest` (sha256 of the sorted {rel: {sha256, size}} JSON)."""
    return hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()


def read_checkpoint(loaded: LoadedRecipe, route: RouteModel, *, use_digest_cache: bool = True) -> CheckpointState:
    """Hash the route's checkpoint the way gate 1 does; RouteBuildError when gate 1 could not accept its layout."""
    ck = route.checkpoint
    where = ("checkpoint", "path")
    if not loaded.resolve(ck.path).is_dir():
        raise RouteBuildError(f"checkpoint folder not found: {loaded.resolve(ck.path)}", where)
    layout = resolve_layout(Path(loaded.base_dir) / ck.path, ck.revision, ck.id)
    if layout.problem is not None or layout.files_dir is None:
        raise RouteBuildError(f"checkpoint layout: {layout.problem or 'no files folder'}", ("checkpoint",))
    files, refused = list_files(layout)
    if refused:
        raise RouteBuildError(
            "checkpoint entries refused (never followed): " + "; ".join(f"{r}: {why}" for r, why in refused), where
        )
    cache = DigestCache(default_cache_path(loaded.base_dir)) if use_digest_cache else None
    digests = hash_files([f.real for f in files], cache)
    current = {f.rel: {"sha256": digests[f.real.absolute()].sha256, "size": f.size} for f in files}
    commit = layout.commit or (ck.revision if COMMIT.match(ck.revision) else None)
    return CheckpointState(layout, commit, current, {f.rel: f.real for f in files}, files_digest(current))


def read_verified(state: CheckpointState, rel: str, limit: int) -> bytes:
    """A checkpoint file's bytes, read through one descriptor that does not follow a symlink, matching its digest."""
    path = state.real[rel]
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
    with os.fdopen(fd, "rb") as f:
        if os.fstat(f.fileno()).st_size > limit:
            raise RouteBuildError(f"checkpoint file {rel} is larger than {limit} bytes")
        data = f.read(limit + 1)
    if hashlib.sha256(data).hexdigest() != state.files[rel]["sha256"]:
        raise RouteBuildError(f"checkpoint file {rel} changed while the route was being built; run again")
    return data


# ----------------------------------------------------------------------------------------------- export


def _load_weights(state: CheckpointState) -> dict[str, Any]:
    from safetensors.numpy import load  # a data format: parses a JSON header and raw tensors, runs nothing

    shards = sorted(r for r in state.files if r.endswith(".safetensors") and "/" not in r)
    if not shards:
        raise RouteBuildError(
            "no top-level *.safetensors weights in the checkpoint (pickle weights are never loaded)",
            ("checkpoint", "path"),
        )
    if sum(state.files[r]["size"] for r in shards) > MAX_WEIGHTS:
        raise RouteBuildError(f"weights larger than {MAX_WEIGHTS} bytes: this exporter holds them in memory")
    weights: dict[str, Any] = {}
    for rel in shards:
        for name, arr in load(read_verified(state, rel, MAX_WEIGHTS)).items():
            if name in weights:
                raise RouteBuildError(f"tensor {name!r} appears in two weight shards")
            weights[name] = arr
    return weights


def export_mlp(weights: Mapping[str, Any], config: Mapping[str, Any]) -> Any:
    """`input [batch, d_in] → fc1 → Relu → … → fcN → logits [batch, d_out]` (Gemm, transB=1), opset 17."""
    import numpy as np
    from onnx import TensorProto, checker, helper, numpy_helper

    n = 0
    while f"fc{n + 1}.weight" in weights:
        n += 1
    if n == 0:
        raise RouteBuildError("mlp exporter: no fc1.weight tensor")
    inits, nodes = [], []
    x, width = "input", None
    dtype = weights["fc1.weight"].dtype
    onnx_type = {np.dtype("float32"): TensorProto.FLOAT, np.dtype("float16"): TensorProto.FLOAT16}.get(np.dtype(dtype))
    if onnx_type is None:
        raise RouteBuildError(f"mlp exporter: weights of dtype {dtype} are not supported (float32, float16)")
    for i in range(1, n + 1):
        w, b = weights[f"fc{i}.weight"], weights.get(f"fc{i}.bias")
        if (
            w.ndim != 2
            or w.dtype != dtype
            or (width is not None and w.shape[1] != width)
            or (b is not None and b.shape != (w.shape[0],))
        ):
            raise RouteBuildError(
                f"mlp exporter: fc{i} has shape {w.shape} (bias {None if b is None else b.shape}), which does not chain"
            )
        names = [x, f"fc{i}.weight"] + ([f"fc{i}.bias"] if b is not None else [])
        inits += [numpy_helper.from_array(np.ascontiguousarray(w), f"fc{i}.weight")]
        if b is not None:
            inits.append(numpy_helper.from_array(np.ascontiguousarray(b), f"fc{i}.bias"))
        out = "logits" if i == n else ("h" if i == 1 else f"h{i}")  # layer 1 named as samples/route/make_onnx.py
        nodes.append(helper.make_node("Gemm", names, [out], transB=1, name=f"fc{i}"))
        if i < n:
            nodes.append(helper.make_node("Relu", [out], [f"{out}_relu"], name="relu" if i == 1 else f"relu{i}"))
            out = f"{out}_relu"
        x, width = out, w.shape[0]
    d_in = weights["fc1.weight"].shape[1]
    graph = helper.make_graph(
        nodes,
        str(config.get("model_type") or "mlp").replace("-", "_"),
        [helper.make_tensor_value_info("input", onnx_type, ["batch", d_in])],
        [helper.make_tensor_value_info("logits", onnx_type, ["batch", width])],
        inits,
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 17)],
        producer_name="trtls-sample" if config.get("model_type") == "tiny-mlp" else "trtls",
    )
    model.ir_version = 8
    checker.check_model(model)
    return model


# model_type (config.json) → exporter(weights, config) -> onnx.ModelProto
EXPORTERS: dict[str, Callable[[Mapping[str, Any], Mapping[str, Any]], Any]] = {
    "tiny-mlp": export_mlp,
    "mlp": export_mlp,
}


def export_onnx(state: CheckpointState, config: Mapping[str, Any], out: Path) -> bytes:
    """Export the checkpoint to ONNX at `out` (atomic; untouched when the bytes are the same). Returns the bytes."""
    model_type = config.get("model_type")
    exporter = EXPORTERS.get(str(model_type))
    if exporter is None:
        raise RouteBuildError(
            f"no ONNX exporter for model_type {model_type!r} (known: {', '.join(EXPORTERS)})", ("checkpoint",)
        )
    data = exporter(_load_weights(state), config).SerializeToString()
    try:
        same = out.is_file() and out.read_bytes() == data
    except OSError:
        same = False
    if not same:
        out.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(out, data)
    return data


def _io_map(model_bytes: bytes, engine: EngineRecipe) -> tuple[dict[str, Any], str]:
    """Inputs/outputs (name, dtype, shape, profile) of the ONNX, and its precision (from the initializers)."""
    import onnx
    from onnx import helper

    model = onnx.load_from_string(model_bytes)

    def value(v: Any) -> dict[str, Any]:
        t = v.type.tensor_type
        return {
            "dtype": helper.tensor_dtype_to_np_dtype(t.elem_type).name,
            "shape": [d.dim_param or d.dim_value for d in t.shape.dim],
        }

    init = {i.name for i in model.graph.initializer}
    # Each input's shapes in every profile, in profile order; "profile" (the first) stays for older readers.
    profiles: dict[str, list[dict[str, Any]]] = {}
    for prof in engine.profiles:
        for name, shapes in prof.shapes().items():
            profiles.setdefault(name, []).append(shapes.model_dump())
    inputs = {
        v.name: dict(
            value(v), **({"profile": profiles[v.name][0], "profiles": profiles[v.name]} if v.name in profiles else {})
        )
        for v in model.graph.input
        if v.name not in init
    }
    outputs = {v.name: value(v) for v in model.graph.output}
    kinds = {helper.tensor_dtype_to_np_dtype(i.data_type).name for i in model.graph.initializer}
    precision = (
        "+".join(
            sorted({"float32": "fp32", "float16": "fp16", "bfloat16": "bf16", "int8": "int8"}.get(k, k) for k in kinds)
        )
        or "fp32"
    )
    return {"inputs": inputs, "outputs": outputs}, precision


# ------------------------------------------------------------------------------------------------ build


@dataclass
class RouteBuildResult:
    route: str
    outcome: str  # built (bundle written) | cancelled | failed | forced | killed | error
    message: str
    bundle: str
    bundle_digest: str | None = None  # "sha256:…" of the bundle written
    sbom: str | None = None
    onnx: str | None = None
    build_id: str | None = None
    build_summary_path: str | None = None
    cancel_source: str | None = None
    previous_bundle: str | None = None  # where the replaced bundle was kept
    previous_kept: bool = False
    notes: list[str] = field(default_factory=list)
    provenance: dict[str, Any] | None = None

    @property
    def ok(self) -> bool:
        return self.outcome == "built"


def _engine_chunks(path: Path, expected_sha: str, sizes: dict[str, int]) -> Iterator[bytes]:
    """The engine file from one descriptor; raises (so nothing is written) unless it is the engine the build made."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
    h, size = hashlib.sha256(), 0
    with os.fdopen(fd, "rb") as f:
        while part := f.read(1024 * 1024):
            h.update(part)
            size += len(part)
            yield part
    if h.hexdigest() != expected_sha:
        raise BundleError(
            [
                BundleProblem(
                    CHECK_SECTION_DIGEST,
                    f"engine {path} is not the engine build recorded (sha256 {h.hexdigest()[:12]}… vs {expected_sha[:12]}…)",
                    section="engine",
                )
            ]
        )
    sizes["engine"] = size


def _keep_previous(bundle: Path, previous: Path, notes: list[str]) -> bool:
    """Copy the bundle at `bundle` (and its sidecar, SBOM) to `previous`, atomically, if it verifies."""
    problems = verify_bundle(bundle)
    if problems:
        notes.append(f"the existing bundle fails verification ({problems[0]}); not kept as the previous bundle")
        return False
    previous.parent.mkdir(parents=True, exist_ok=True)
    side, prev_side = sidecar_path(bundle), sidecar_path(previous)
    side_bytes = side.read_bytes() if side.is_file() else None
    sbom_bytes = sbom_path(bundle).read_bytes() if sbom_path(bundle).is_file() else None

    def chunks() -> Iterator[bytes]:
        with open(bundle, "rb") as f:
            while part := f.read(1024 * 1024):
                yield part

    atomic_write_bytes(previous, chunks())
    if side_bytes is not None:
        try:
            record = json.loads(side_bytes)
            if isinstance(record, dict):
                record["bundle"] = previous.name
                side_bytes = (json.dumps(record, indent=2, ensure_ascii=False) + "\n").encode()
        except ValueError:
            pass
        atomic_write_bytes(prev_side, side_bytes)
    if sbom_bytes is not None:
        atomic_write_bytes(sbom_path(previous), sbom_bytes)
    if verify_bundle(previous):
        notes.append(f"the copy at {previous} does not verify")
        return False
    return True


def _licence(state: CheckpointState) -> str | None:
    card = next((r for r in ("README.md", "readme.md") if r in state.files), None)
    if card is None:
        return None
    try:
        from huggingface_hub import ModelCard

        data = ModelCard(read_verified(state, card, MAX_EMBED).decode("utf-8")).data.to_dict()
    except Exception:
        return None
    raw = data.get("license")
    if isinstance(raw, list):
        raw = ", ".join(map(str, raw))
    return str(raw) if raw else None


def _load(recipe: str | os.PathLike[str] | LoadedRecipe) -> LoadedRecipe:
    if isinstance(recipe, LoadedRecipe):
        return recipe
    p = Path(recipe)
    return load_recipe(p / "trtls.toml" if p.is_dir() else p)


def _onnx_only_errors(loaded: LoadedRecipe, engine: str) -> bool:
    """True when the recipe's only errors are 'ONNX file not found' for this engine (the route build makes it)."""
    return bool(loaded.errors) and all(
        f.code == "TRT104" and tuple(f.path) == ("engines", engine, "onnx") for f in loaded.errors
    )


async def build_route(
    recipe: str | os.PathLike[str] | LoadedRecipe,
    route_name: str,
    *,
    view: Callable[[Any], Any] | None = None,
    on_build: Callable[[Any], None] | None = None,
    overrides: dict[str, Any] | None = None,
    use_digest_cache: bool = True,
    faults: dict[str, Any] | None = None,
) -> RouteBuildResult:
    """Build the route's bundle (see the module docstring). Raises RouteBuildError for bad input before any build.

    `faults` is passed to the build worker for the acceptance tests only (see docs/protocol.md); never from a recipe.
    """
    from trtls import __version__
    from trtls.builds.supervisor import Supervisor
    from trtls.bundle import sbom as sbom_mod
    from trtls.gates.run import route_dir

    loaded = _load(recipe)
    try:
        route = route_model(loaded, route_name)
    except (KeyError, ValueError) as exc:
        raise RouteBuildError(f"route {route_name!r}: {exc}") from None
    raw_engine = (loaded.data.get("engines") or {}).get(route.engine) if isinstance(loaded.data, dict) else None
    if loaded.recipe is None and not (isinstance(raw_engine, dict) and _onnx_only_errors(loaded, route.engine)):
        raise RouteBuildError(
            "the recipe has errors: "
            + "; ".join(f"{loaded.location(f)}: {f.code} {f.message}" for f in loaded.errors[:5])
        )
    engine = loaded.engine(route.engine) if loaded.recipe is not None else EngineRecipe.model_validate(raw_engine)
    bundle_path = loaded.resolve(route.bundle)
    result = RouteBuildResult(route_name, "error", "", str(bundle_path))

    # 1-2. checkpoint → ONNX
    state = read_checkpoint(loaded, route, use_digest_cache=use_digest_cache)
    if "config.json" not in state.files:
        raise RouteBuildError("checkpoint has no config.json (model_type chooses the exporter)", ("checkpoint", "path"))
    config_bytes = read_verified(state, "config.json", MAX_EMBED)
    try:
        config = json.loads(config_bytes)
    except ValueError as exc:
        raise RouteBuildError(f"config.json does not parse: {exc}") from None
    if not isinstance(config, dict):
        raise RouteBuildError("config.json is not a JSON object")
    tokenizer_bytes = read_verified(state, "tokenizer.json", MAX_EMBED) if "tokenizer.json" in state.files else None
    if tokenizer_bytes is None:
        result.notes.append(
            "the checkpoint has no tokenizer.json: the bundle carries none (gate 1 judges the tokenizer)"
        )
    onnx_path = loaded.resolve(engine.onnx)
    onnx_bytes = export_onnx(state, config, onnx_path)
    result.onnx = str(onnx_path)
    io_map, precision = _io_map(onnx_bytes, engine)
    if loaded.recipe is None or not isinstance(recipe, LoadedRecipe):
        loaded = load_recipe(loaded.path)  # the ONNX exists now; validate again before building
        if loaded.recipe is None:
            raise RouteBuildError(
                "the recipe has errors: "
                + "; ".join(f"{loaded.location(f)}: {f.code} {f.message}" for f in loaded.errors[:5])
            )

    # 3. engine, through the build core
    sup = Supervisor()
    build = sup.start(loaded, route.engine, overrides=overrides, faults=faults)
    result.build_id = build.id
    if on_build is not None:
        on_build(build)
    shown = view(build) if view is not None else None
    if shown is not None:
        build.listeners.append(shown.update)
        with shown:
            while build.running:
                await asyncio.sleep(0.125)
                shown.tick()
            summary = await build.wait()
    else:
        summary = await build.wait()
    result.build_summary_path = str(build.evidence_dir / "summary.json")
    result.cancel_source = summary.get("cancelSource")
    if summary.get("outcome") != "built":
        result.outcome = summary.get("outcome") or "killed"
        result.message = f"build {build.outcome_message()}; the bundle was not touched"
        _record(route_dir(loaded, route_name), result)
        return result
    artifact = summary.get("engineArtifact") or {}
    if not artifact.get("sha256"):
        result.outcome, result.message = "failed", "the build recorded no engine artifact; the bundle was not touched"
        _record(route_dir(loaded, route_name), result)
        return result

    # 4. bundle
    env = summary.get("environment") or {}
    module = summary.get("builderModule") or env.get("module") or "tensorrt"
    version = str(summary.get("tensorrtVersion") or env.get("version") or "unknown")
    onnx_sha = hashlib.sha256(onnx_bytes).hexdigest()
    created_at = datetime.now(UTC).replace(microsecond=0)
    header = {
        "model_id": route.checkpoint.id or str(config.get("_name_or_path") or route_name),
        "model_type": str(config.get("model_type")),
        "family": str((config.get("architectures") or [config.get("model_type")])[0]),
        "trt_version": version,
        "trt_abi": f"{module}-{version.split('.')[0]}",
        "gpu_name": env.get("device_name") or "none (AOT CPU build)",
        "created_at": created_at.isoformat().replace("+00:00", "Z"),
        "precision": precision,
        "runtime_strategy": f"{module}-engine",
        "io_map": io_map,
    }
    provenance = {
        "route": route_name,
        "checkpoint_id": route.checkpoint.id,
        "checkpoint_revision": route.checkpoint.revision,
        "checkpoint_commit": state.commit,
        "checkpoint_files_sha256": state.files_digest,
        "checkpoint_files": {rel: f["sha256"] for rel, f in sorted(state.files.items())},
        "build_id": summary.get("buildId"),
        "build_config_hash": summary.get("buildConfigHash"),
        "builder": module,
        "builder_version": version,
        "onnx_sha256": onnx_sha,
        "engine_sha256": artifact["sha256"],
        "trtls_version": __version__,
    }
    sizes: dict[str, int] = {}
    sections: dict[str, Any] = {
        "engine": _engine_chunks(Path(artifact.get("path") or build.output), artifact["sha256"], sizes),
        "model.onnx": onnx_bytes,
        "config.json": config_bytes,
    }
    if tokenizer_bytes is not None:
        sections["tokenizer.json"] = tokenizer_bytes
    bundle_path.parent.mkdir(parents=True, exist_ok=True)
    if bundle_path.is_file() and route.previous_bundle:
        previous = loaded.resolve(route.previous_bundle)
        result.previous_bundle = str(previous)
        if previous.exists():
            result.notes.append(
                f"previous bundle {previous} exists and is kept as it is; the old bundle at {bundle_path} is replaced"
            )
        else:
            result.previous_kept = _keep_previous(bundle_path, previous, result.notes)
    digests = write_bundle(bundle_path, header, sections, provenance=provenance)
    result.bundle_digest = f"sha256:{digests.file_sha256}"
    result.provenance = provenance

    # 5. SBOM
    ck_files = [sbom_mod.FileDigest(rel, f["sha256"], f["size"]) for rel, f in sorted(state.files.items())]
    url = (
        f"https://huggingface.co/{route.checkpoint.id}/tree/{state.commit}"
        if state.layout.kind == "hf_cache" and route.checkpoint.id and state.commit
        else None
    )
    doc = sbom_mod.make_sbom(
        bundle=sbom_mod.FileDigest(bundle_path.name, digests.file_sha256, digests.size),
        checkpoint_id=route.checkpoint.id or route_name,
        checkpoint_revision=state.commit or route.checkpoint.revision,
        checkpoint_files=ck_files,
        builder_name=module,
        builder_version=version,
        trtls_version=__version__,
        onnx=sbom_mod.FileDigest(onnx_path.name, onnx_sha, len(onnx_bytes)),
        engine=sbom_mod.FileDigest(Path(build.output).name, digests.section_sha256["engine"], sizes.get("engine")),
        checkpoint_license=_licence(state),
        checkpoint_url=url,
        properties={
            "build_config_hash": str(summary.get("buildConfigHash")),
            "build_id": str(summary.get("buildId")),
            "route": route_name,
            "checkpoint_files_sha256": state.files_digest,
        },
        timestamp=created_at,
    )
    sbom_mod.write_sbom(sbom_path(bundle_path), doc)
    result.sbom = str(sbom_path(bundle_path))
    result.outcome = "built"
    result.message = f"bundle written: {bundle_path} ({digests.size} bytes, {result.bundle_digest})"
    _record(route_dir(loaded, route_name), result)
    return result


def _record(folder: Path, result: RouteBuildResult) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    data = asdict(result)
    data["recordedAt"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    atomic_write_text(folder / "route-build.json", json.dumps(data, indent=2, default=str) + "\n")


# -------------------------------------------------------------------------------------------------- CLI


def cmd_route_build(args: Any) -> int:
    """Exit codes: 0 bundle written, 1 build failed, 2 bad input, 130 cancelled (Ctrl-C), 137 forced/killed."""
    import signal

    from trtls.cli.terminal_view import PlainView, RichView, print_outcome  # a face: imported by the CLI only
    from trtls.core.route import route_names

    loaded = _load(args.recipe or ".")
    if not loaded.text:
        print(f"{loaded.path}: TRT104 recipe file not found or unreadable", file=sys.stderr)
        return EXIT_BAD_INPUT
    names = route_names(loaded)
    name = args.route or (names[0] if len(names) == 1 else None)
    if name is None or name not in names:
        print(
            f"{loaded.path}: TRT107 choose a route with --route (routes: {', '.join(names) or 'none'})", file=sys.stderr
        )
        return EXIT_BAD_INPUT
    holder: dict[str, Any] = {}

    def on_build(build: Any) -> None:
        holder["build"] = build
        loop = asyncio.get_running_loop()
        presses = {"n": 0}

        def on_sigint() -> None:
            presses["n"] += 1
            if presses["n"] == 1:
                build.cancel("ctrl_c")
                print(f"\nstopping {build.engine} (cooperative; Ctrl-C again to force)…", file=sys.stderr, flush=True)
            else:
                build.force()

        loop.add_signal_handler(signal.SIGINT, on_sigint)
        loop.add_signal_handler(signal.SIGTERM, lambda: build.cancel("service_shutdown"))

    view_cls = RichView if sys.stdout.isatty() else PlainView
    try:
        result = asyncio.run(
            build_route(loaded, name, view=view_cls, on_build=on_build, use_digest_cache=not args.no_digest_cache)
        )
    except RouteBuildError as exc:
        where = ""
        if exc.path and loaded.source_map is not None:
            try:
                where = f"{loaded.path}:{loaded.source_map.range(('routes', name) + tuple(exc.path), True).human()}: "
            except Exception:
                where = f"{loaded.path}: "
        print(f"{where or str(loaded.path) + ': '}trtls route build: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except BundleError as exc:
        print(f"trtls route build: bundle not written: {exc}", file=sys.stderr)
        return EXIT_FAILED
    if "build" in holder:
        print_outcome(holder["build"])
    print(f"\nroute {name}: {result.message}")
    if result.ok:
        print(f"  sidecar: {sidecar_path(result.bundle)}\n  sbom: {result.sbom}")
        if result.previous_bundle:
            print(
                f"  previous bundle: {result.previous_bundle} ({'kept from the replaced bundle' if result.previous_kept else 'unchanged'})"
            )
    for note in result.notes:
        print(f"  note: {note}")
    if result.ok:
        return EXIT_BUILT
    return {"failed": EXIT_FAILED, "forced": EXIT_KILLED, "killed": EXIT_KILLED}.get(
        result.outcome, EXIT_CTRL_C if result.cancel_source == "ctrl_c" else EXIT_FAILED
    )
