"""`trtls route build` for a route with no engine: it deploys the exported ONNX itself (runtime target ONNX Runtime).

checkpoint → ONNX (the route's `onnx`) → [precision conversion] → bundle with sections model.onnx, config.json,
tokenizer.json and no engine; the header says so (`trt_version = "none (…)"`, `runtime_strategy =
"onnxruntime-<version>-cpu"`) and the provenance names the exporter and the ONNX Runtime version instead of a build.
Sidecar, SBOM and the previous-bundle rule are the engine route's (`route.build`).

With `[routes.NAME.precision] convert = "fp16"` (or bf16) the bundle's model.onnx is the export converted by ModelOpt
AutoCast — the same step, settings and content-keyed cache (`.trtls/precision`) as an engine's conversion
(`builds.precision.run_precision_step`); `onnx` stays the unconverted export, which gate 4's `onnx.reference`
reference runs, and the provenance records the conversion (settings, ModelOpt version, input and output sha256).
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from trtls.core.cancel import CancelToken
from trtls.core.recipe import LoadedRecipe
from trtls.core.route import RouteModel
from trtls.core.runtime_session import runtime_session
from trtls.fs import read_bytes
from trtls.route.checkpoint import checkpoint_provenance, model_identity, read_route_inputs
from trtls.route.errors import RouteBuildError, recipe_errors
from trtls.route.exporters import export_onnx, onnx_io_map
from trtls.route.pooling import sentence_pooling
from trtls.route.publish import checkpoint_sections, publish_unless_stopped, route_bundle
from trtls.route.result import RouteBuildResult
from trtls.route.writes import RouteRoots, write_export

MAX_CONVERTED = 4 * 1024 * 1024 * 1024  # a converted model is read whole: at most the exporters' weights, twice


def build_onnx_route(
    loaded: LoadedRecipe,
    route_name: str,
    route: RouteModel,
    roots: RouteRoots,
    *,
    use_digest_cache: bool,
    token: CancelToken | None = None,
) -> RouteBuildResult:
    """A route with no engine deploys its ONNX itself (runtime target ONNX Runtime): checkpoint → ONNX (`route.onnx`)
    → bundle with sections model.onnx, config.json, tokenizer.json, and no engine; sidecar and SBOM as for engines.
    Runs off the event loop (`route.build` calls it in a thread); `token` is checked between the steps and stops the
    conversion's child, so a stop ends `cancelled` with nothing written."""
    from trtls import __version__
    from trtls.bundle import sbom as sbom_mod

    if loaded.recipe is None:
        raise recipe_errors(loaded)
    token = token or CancelToken()
    state, config, config_bytes, tokenizer_bytes = read_route_inputs(loaded, route, use_digest_cache=use_digest_cache)
    bundle = route_bundle(loaded, route_name, route, state, roots)
    result = bundle.result
    if token.is_set:
        return bundle.stopped(token, "the checkpoint read")
    onnx_path = loaded.resolve(str(route.onnx))
    pooling = sentence_pooling(state)  # modules.json: the sentence_embedding users of the checkpoint deploy
    onnx_bytes = export_onnx(state, config, pooling)
    write_export(loaded, route_name, route, onnx_path, onnx_bytes, roots)  # never over a file trtls did not write
    result.onnx = str(onnx_path)
    if token.is_set:
        return bundle.stopped(token, "the ONNX export")
    try:
        deployed, conversion = deployed_onnx(loaded, route, onnx_path, onnx_bytes, token)
    except RouteBuildError:
        if token.is_set:
            return bundle.stopped(token, "the precision conversion")
        raise
    if token.is_set:
        return bundle.stopped(token, "the precision conversion")
    io_map, precision = onnx_io_map(deployed, None)
    if conversion is not None:
        precision = str(conversion["low_precision_type"])  # the graph's compute precision, not its (kept) I/O types
    onnx_sha = hashlib.sha256(onnx_bytes).hexdigest()
    created_at = datetime.now(UTC)  # to the microsecond: two builds of the same ONNX are still two bundles
    runtime_header, runtime_provenance = onnxruntime_fields(route, created_at, precision, io_map)
    header = {**model_identity(route, config, route_name), **runtime_header}
    provenance = {
        **checkpoint_provenance(route, route_name, state),
        "build_id": None,
        "build_config_hash": None,
        "builder": "trtls-exporter",
        "builder_version": __version__,
        "exporter": str(config.get("model_type")),
        "onnx_sha256": onnx_sha,
        **({"precision_conversion": conversion} if conversion is not None else {}),
        **runtime_provenance,
        **({"pooling": pooling.as_dict()} if pooling is not None else {}),  # gate 4's TRT816 checks it (modules.json)
    }
    sections = {"model.onnx": deployed, **checkpoint_sections(state, config_bytes, tokenizer_bytes)}
    # the route build's stop is seen until the bundle's rename: no bundle, never a partial one
    digests = publish_unless_stopped(
        bundle,
        token,
        header,
        sections,
        provenance,
        onnx=sbom_mod.FileDigest(onnx_path.name, onnx_sha, len(onnx_bytes)),
        properties={
            "route": route_name,
            "checkpoint_files_sha256": state.files_digest,
            "runtime": str(header["runtime_strategy"]),
        },
        timestamp=created_at,
    )
    if digests is None:
        return bundle.stopped(token, "the bundle's write")
    result.outcome = "built"
    converted = f", converted to {conversion['low_precision_type']}" if conversion is not None else ""
    result.message = (
        f"bundle written (ONNX{converted}, no engine): {bundle.path} ({digests.size} bytes, {result.bundle_digest})"
    )
    return result


def onnxruntime_fields(
    route: RouteModel, created_at: datetime, precision: str, io_map: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """What a bundle with no engine says of how it runs — ONNX Runtime on the CPU, with the route's session options —
    as (header fields after the model's identity, provenance fields after the ONNX's digest). The ONNX route and the
    export route both deploy their model.onnx this way."""
    from trtls import __version__

    try:
        import importlib.metadata as md

        ort_version = md.version("onnxruntime")
    except Exception:
        ort_version = "not installed"
    header = {
        "trt_version": "none (the route deploys the ONNX model)",
        "trt_abi": "none",
        "gpu_name": "none (ONNX Runtime on the CPU)",
        "created_at": created_at.isoformat().replace("+00:00", "Z"),
        "precision": precision,
        "runtime_strategy": f"onnxruntime-{ort_version}-cpu",
        "io_map": io_map,
    }
    provenance = {
        "engine_sha256": None,
        "runtime": f"onnxruntime {ort_version}",
        "runtime_session": runtime_session(route.runtime, route.runtime_options),  # gate 5: TRT912
        "trtls_version": __version__,
    }
    return header, provenance


def deployed_onnx(
    loaded: LoadedRecipe, route: RouteModel, onnx_path: Path, onnx_bytes: bytes, token: CancelToken | None = None
) -> tuple[bytes, dict[str, Any] | None]:
    """The ONNX model the route deploys and the record of its conversion: the export as it is, or (with
    `route.precision`) the export converted by ModelOpt AutoCast through the build's precision step and cache.
    RouteBuildError, located at `precision`, when ModelOpt is missing or the conversion fails or is stopped."""
    from trtls.builds.precision import PrecisionCancelled, PrecisionFailed, run_precision_step
    from trtls.builds.supervisor.job import state_dir

    if route.precision is None:
        return onnx_bytes, None
    spec = route.precision.model_dump()
    try:
        converted = run_precision_step(onnx_path, spec, state_dir(loaded.path) / "precision", token or CancelToken())
    except PrecisionCancelled as exc:
        raise RouteBuildError(f"precision conversion stopped: {exc}", ("precision",)) from None
    except PrecisionFailed as exc:
        raise RouteBuildError(f"precision conversion ({spec['convert']}) failed: {exc}", ("precision",)) from None
    try:
        data = read_bytes(converted.onnx, limit=MAX_CONVERTED, follow=False)
    except OSError as exc:
        raise RouteBuildError(f"the converted model {converted.onnx} cannot be read: {exc}", ("precision",)) from None
    keys = ("tool", "low_precision_type", "keep_io_types", "exclude_op_types", "exclude_nodes", "modelopt_version")
    record = {k: converted.record.get(k) for k in keys}
    record["input_sha256"] = hashlib.sha256(onnx_bytes).hexdigest()
    record["output_sha256"] = hashlib.sha256(data).hexdigest()
    return data, record
