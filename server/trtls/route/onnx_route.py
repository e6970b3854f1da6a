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
from trtls.route.checkpoint import checkpoint_provenance, deployment_sections, model_identity, read_route_inputs
from trtls.route.errors import RouteBuildError, recipe_errors
from trtls.route.exporters import export_onnx, onnx_io_map
from trtls.route.pooling import sentence_pooling
from trtls.route.publish import publish_bundle
from trtls.route.result import RouteBuildResult, stopped_before_bundle
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
    bundle_path = loaded.resolve(route.bundle)
    result = RouteBuildResult(route_name, "error", "", str(bundle_path))
    token = token or CancelToken()

    def stopped(step: str) -> RouteBuildResult:
        return stopped_before_bundle(route_name, str(bundle_path), str(token.source), step)

    state, config, config_bytes, tokenizer_bytes = read_route_inputs(loaded, route, use_digest_cache=use_digest_cache)
    if token.is_set:
        return stopped("the checkpoint read")
    onnx_path = loaded.resolve(str(route.onnx))
    pooling = sentence_pooling(state)  # modules.json: the sentence_embedding users of the checkpoint deploy
    onnx_bytes = export_onnx(state, config, pooling)
    write_export(loaded, route_name, route, onnx_path, onnx_bytes, roots)  # never over a file trtls did not write
    result.onnx = str(onnx_path)
    if token.is_set:
        return stopped("the ONNX export")
    try:
        deployed, conversion = deployed_onnx(loaded, route, onnx_path, onnx_bytes, token)
    except RouteBuildError:
        if token.is_set:
            return stopped("the precision conversion")
        raise
    if token.is_set:
        return stopped("the precision conversion")
    io_map, precision = onnx_io_map(deployed, None)
    if conversion is not None:
        precision = str(conversion["low_precision_type"])  # the graph's compute precision, not its (kept) I/O types
    try:
        import importlib.metadata as md

        ort_version = md.version("onnxruntime")
    except Exception:
        ort_version = "not installed"
    onnx_sha = hashlib.sha256(onnx_bytes).hexdigest()
    created_at = datetime.now(UTC)  # to the microsecond: two builds of the same ONNX are still two bundles
    header = {
        **model_identity(route, config, route_name),
        "trt_version": "none (the route deploys the ONNX model)",
        "trt_abi": "none",
        "gpu_name": "none (ONNX Runtime on the CPU)",
        "created_at": created_at.isoformat().replace("+00:00", "Z"),
        "precision": precision,
        "runtime_strategy": f"onnxruntime-{ort_version}-cpu",
        "io_map": io_map,
    }
    provenance = {
        **checkpoint_provenance(route, route_name, state),
        "build_id": None,
        "build_config_hash": None,
        "builder": "trtls-exporter",
        "builder_version": __version__,
        "exporter": str(config.get("model_type")),
        "onnx_sha256": onnx_sha,
        **({"precision_conversion": conversion} if conversion is not None else {}),
        "engine_sha256": None,
        "runtime": f"onnxruntime {ort_version}",
        "runtime_session": runtime_session(route.runtime, route.runtime_options),  # gate 5: TRT912
        "trtls_version": __version__,
        **({"pooling": pooling.as_dict()} if pooling is not None else {}),  # gate 4's TRT816 checks it (modules.json)
    }
    sections: dict[str, Any] = {"model.onnx": deployed, "config.json": config_bytes}
    if tokenizer_bytes is not None:
        sections["tokenizer.json"] = tokenizer_bytes
    sections.update(deployment_sections(state))  # tokenizer settings, sentence-transformers pooling, …
    digests = publish_bundle(
        loaded,
        route_name,
        route,
        state,
        result,
        roots,
        header=header,
        sections=sections,
        provenance=provenance,
        builder=("trtls-exporter", __version__),
        onnx=sbom_mod.FileDigest(onnx_path.name, onnx_sha, len(onnx_bytes)),
        properties={
            "route": route_name,
            "checkpoint_files_sha256": state.files_digest,
            "runtime": str(header["runtime_strategy"]),
        },
        timestamp=created_at,
    )
    result.outcome = "built"
    converted = f", converted to {conversion['low_precision_type']}" if conversion is not None else ""
    result.message = (
        f"bundle written (ONNX{converted}, no engine): {bundle_path} ({digests.size} bytes, {result.bundle_digest})"
    )
    return result


def deployed_onnx(
    loaded: LoadedRecipe, route: RouteModel, onnx_path: Path, onnx_bytes: bytes, token: CancelToken | None = None
) -> tuple[bytes, dict[str, Any] | None]:
    """The ONNX model the route deploys and the record of its conversion: the export as it is, or (with
    `route.precision`) the export converted by ModelOpt AutoCast through the build's precision step and cache.
    RouteBuildError, located at `precision`, when ModelOpt is missing or the conversion fails or is stopped."""
    from trtls.builds.precision import PrecisionCancelled, PrecisionFailed, run_precision_step
    from trtls.builds.supervisor.build import state_dir

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
