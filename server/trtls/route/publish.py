"""Where every route build ends, an engine route's or an ONNX route's: the previous-bundle rule, the bundle, and
its CycloneDX SBOM. One writer, so the two routes' bundles and SBOMs cannot drift apart (issue 18: the ONNX route's
copy had lost the checkpoint's `checkpoint_url`)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from trtls import __version__, fs
from trtls.bundle import BundleDigests, write_bundle
from trtls.bundle import sbom as sbom_mod
from trtls.bundle.sections import engine_section
from trtls.core.recipe import LoadedRecipe
from trtls.core.route import RouteModel
from trtls.route.checkpoint import CheckpointState, checkpoint_licence
from trtls.route.result import RouteBuildResult, keep_previous
from trtls.route.writes import RouteRoots, write_refused


def checkpoint_url(route: RouteModel, state: CheckpointState) -> str | None:
    """The checkpoint's page at the exact commit, for a Hugging Face cache layout (None for a local folder)."""
    if state.layout.kind == "hf_cache" and route.checkpoint and route.checkpoint.id and state.commit:
        return f"https://huggingface.co/{route.checkpoint.id}/tree/{state.commit}"
    return None


def publish_bundle(
    loaded: LoadedRecipe,
    route_name: str,
    route: RouteModel,
    state: CheckpointState,
    result: RouteBuildResult,
    roots: RouteRoots,
    *,
    header: Mapping[str, Any],
    sections: Mapping[str, Any],
    provenance: dict[str, Any],
    builder: tuple[str, str],
    onnx: sbom_mod.FileDigest,
    engine_file: str | None = None,
    engine_sizes: Mapping[str, int] | None = None,
    properties: Mapping[str, str],
    timestamp: datetime,
    plugins: Sequence[sbom_mod.FileDigest] = (),
) -> BundleDigests:
    """Keep the previous bundle when the route asks (and it verifies), write the bundle atomically, then its SBOM
    beside it; `result` records each. `engine_file` names the engine section's file in the SBOM (None: no engine);
    `engine_sizes` is filled while the engine section streams (its size is known only after the write). Every file
    is written inside the folder `roots` fixed for it; an OSError (a refusal of the door too) is TRT412 on the key
    that names the file, and what was there before is whole."""
    bundle_path = Path(result.bundle)
    if bundle_path.is_file() and route.previous_bundle and roots.previous is not None:
        previous = loaded.resolve(route.previous_bundle)
        result.previous_bundle = str(previous)
        if os.path.lexists(previous):
            result.notes.append(
                f"previous bundle {previous} exists and is kept as it is; the old bundle at {bundle_path} is replaced"
            )
        else:
            try:
                result.previous_kept = keep_previous(bundle_path, previous, result.notes, within=roots.previous)
            except OSError as exc:
                raise write_refused(exc, "the previous bundle", ("previous_bundle",)) from None
    try:
        fs.ensure_folder(bundle_path.parent, within=roots.bundle)
        digests = write_bundle(bundle_path, dict(header), dict(sections), provenance=provenance, within=roots.bundle)
    except OSError as exc:
        raise write_refused(exc, "the bundle", ("bundle",)) from None
    result.bundle_digest = f"sha256:{digests.file_sha256}"
    result.provenance = provenance
    engine_name = engine_section(digests.section_sha256)  # `engine`, or TRTMC's `engine_plan`
    engine = (
        sbom_mod.FileDigest(engine_file, digests.section_sha256[engine_name], (engine_sizes or {}).get("engine"))
        if engine_file and engine_name is not None
        else None
    )
    doc = sbom_mod.make_sbom(
        bundle=sbom_mod.FileDigest(bundle_path.name, digests.file_sha256, digests.size),
        checkpoint_id=(route.checkpoint.id if route.checkpoint else None) or route_name,
        checkpoint_revision=state.commit or (route.checkpoint.revision if route.checkpoint else "export"),
        checkpoint_files=[sbom_mod.FileDigest(rel, f["sha256"], f["size"]) for rel, f in sorted(state.files.items())],
        builder_name=builder[0],
        builder_version=builder[1],
        trtls_version=__version__,
        onnx=onnx,
        engine=engine,
        checkpoint_license=checkpoint_licence(state),
        checkpoint_url=checkpoint_url(route, state),
        properties=dict(properties),
        timestamp=timestamp,
        plugins=plugins,
    )
    try:
        sbom_mod.write_sbom(sbom_mod.sbom_path(bundle_path), doc, within=roots.bundle)
    except OSError as exc:
        raise write_refused(exc, "the bundle's SBOM", ("bundle",)) from None
    result.sbom = str(sbom_mod.sbom_path(bundle_path))
    return digests
