"""`trtls route build` for a route with no engine: it deploys the exported ONNX itself (runtime target ONNX Runtime).

checkpoint → ONNX (the route's `onnx`) → bundle with sections model.onnx, config.json, tokenizer.json and no engine;
the header says so (`trt_version = "none (…)"`, `runtime_strategy = "onnxruntime-<version>-cpu"`) and the provenance
names the exporter and the ONNX Runtime version instead of a build. Sidecar, SBOM and the previous-bundle rule are
the engine route's (`route.build`).
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from typing import Any

from trtls.bundle import write_bundle
from trtls.bundle.sbom import sbom_path
from trtls.core.recipe import LoadedRecipe
from trtls.core.route import RouteModel
from trtls.route.checkpoint import checkpoint_licence, checkpoint_provenance, model_identity, read_route_inputs
from trtls.route.errors import recipe_errors
from trtls.route.exporters import export_onnx, onnx_io_map
from trtls.route.result import RouteBuildResult, keep_previous


def build_onnx_route(
    loaded: LoadedRecipe, route_name: str, route: RouteModel, *, use_digest_cache: bool
) -> RouteBuildResult:
    """A route with no engine deploys its ONNX itself (runtime target ONNX Runtime): checkpoint → ONNX (`route.onnx`)
    → bundle with sections model.onnx, config.json, tokenizer.json, and no engine; sidecar and SBOM as for engines."""
    from trtls import __version__
    from trtls.bundle import sbom as sbom_mod

    if loaded.recipe is None:
        raise recipe_errors(loaded)
    bundle_path = loaded.resolve(route.bundle)
    result = RouteBuildResult(route_name, "error", "", str(bundle_path))
    state, config, config_bytes, tokenizer_bytes = read_route_inputs(loaded, route, use_digest_cache=use_digest_cache)
    onnx_path = loaded.resolve(str(route.onnx))
    onnx_bytes = export_onnx(state, config, onnx_path)
    result.onnx = str(onnx_path)
    io_map, precision = onnx_io_map(onnx_bytes, None)
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
        "engine_sha256": None,
        "runtime": f"onnxruntime {ort_version}",
        "trtls_version": __version__,
    }
    sections: dict[str, Any] = {"model.onnx": onnx_bytes, "config.json": config_bytes}
    if tokenizer_bytes is not None:
        sections["tokenizer.json"] = tokenizer_bytes
    bundle_path.parent.mkdir(parents=True, exist_ok=True)
    if bundle_path.is_file() and route.previous_bundle:
        previous = loaded.resolve(route.previous_bundle)
        result.previous_bundle = str(previous)
        if previous.exists():
            result.notes.append(f"previous bundle {previous} exists and is kept as it is")
        else:
            result.previous_kept = keep_previous(bundle_path, previous, result.notes)
    digests = write_bundle(bundle_path, header, sections, provenance=provenance)
    result.bundle_digest = f"sha256:{digests.file_sha256}"
    result.provenance = provenance
    ck_files = [sbom_mod.FileDigest(rel, f["sha256"], f["size"]) for rel, f in sorted(state.files.items())]
    doc = sbom_mod.make_sbom(
        bundle=sbom_mod.FileDigest(bundle_path.name, digests.file_sha256, digests.size),
        checkpoint_id=route.checkpoint.id or route_name,
        checkpoint_revision=state.commit or route.checkpoint.revision,
        checkpoint_files=ck_files,
        builder_name="trtls-exporter",
        builder_version=__version__,
        trtls_version=__version__,
        onnx=sbom_mod.FileDigest(onnx_path.name, onnx_sha, len(onnx_bytes)),
        checkpoint_license=checkpoint_licence(state),
        properties={
            "route": route_name,
            "checkpoint_files_sha256": state.files_digest,
            "runtime": str(header["runtime_strategy"]),
        },
        timestamp=created_at,
    )
    sbom_mod.write_sbom(sbom_path(bundle_path), doc)
    result.sbom = str(sbom_path(bundle_path))
    result.outcome = "built"
    result.message = f"bundle written (ONNX, no engine): {bundle_path} ({digests.size} bytes, {result.bundle_digest})"
    return result
