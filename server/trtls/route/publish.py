"""Where every route build ends, an engine route's or an ONNX route's: the previous-bundle rule, the bundle, and
its CycloneDX SBOM. One writer, so the two routes' bundles and SBOMs cannot drift apart (issue 18: the ONNX route's
copy had lost the checkpoint's `checkpoint_url`)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from trtls import __version__, fs
from trtls.bundle import BundleDigests, write_bundle
from trtls.bundle import sbom as sbom_mod
from trtls.bundle.sections import engine_section
from trtls.core.cancel import CancelToken
from trtls.core.recipe import LoadedRecipe
from trtls.core.route import RouteModel
from trtls.route.checkpoint import CheckpointState, checkpoint_licence, deployment_sections
from trtls.route.result import RouteBuildResult, keep_previous, stopped_before_bundle
from trtls.route.writes import RouteRoots, write_refused


@dataclass(frozen=True)
class RouteBundle:
    """What one route build's bundle is for, fixed once the checkpoint (or export) is read: the recipe and route, the
    files the bundle describes, the folders its writes stay in, and the result each step fills. Every route kind
    (engine, ONNX, export) makes one and publishes through it, so `publish_bundle` is told these once."""

    loaded: LoadedRecipe
    route_name: str
    route: RouteModel
    state: CheckpointState
    roots: RouteRoots
    result: RouteBuildResult

    @property
    def path(self) -> Path:
        return Path(self.result.bundle)

    def stopped(self, token: CancelToken, step: str) -> RouteBuildResult:
        """The result of a build `token` stopped during `step`, before the bundle was touched."""
        return stopped_before_bundle(self.route_name, self.result.bundle, str(token.source), step)

    def stopped_after_build(self, token: CancelToken) -> RouteBuildResult:
        """The result of a route build `token` stopped after its engine was built, before its bundle was written: the
        build's record stays (its engine at its output), the bundle is as it was; what the step did already (the
        previous bundle kept) is in its notes."""
        stopped = self.stopped(token, "the bundle's assembly, after the engine was built")
        done = self.result
        stopped.build_id, stopped.build_summary_path = done.build_id, done.build_summary_path
        stopped.previous_bundle, stopped.previous_kept = done.previous_bundle, done.previous_kept
        stopped.notes = done.notes
        return stopped


class BundleStepStopped(Exception):
    """The route build's stop, seen during the bundle step (`bundle_stop`): the bundle's write ends there, its temp
    file removed."""


def bundle_stop(token: CancelToken) -> Callable[[], None]:
    """`publish_bundle`'s `stop` for a route build's `token`: raises BundleStepStopped once a stop was asked."""

    def stop() -> None:
        if token.is_set:
            raise BundleStepStopped

    return stop


def publish_unless_stopped(
    bundle: RouteBundle,
    token: CancelToken,
    header: Mapping[str, Any],
    sections: Mapping[str, Any],
    provenance: dict[str, Any],
    *,
    onnx: sbom_mod.FileDigest,
    properties: Mapping[str, str],
    timestamp: datetime,
) -> BundleDigests | None:
    """`publish_bundle` with the route build's stop (`bundle_stop(token)`), for a route that builds no engine: None
    when the stop came before the bundle's rename (the bundle there stays as it was, no temp file)."""
    try:
        return publish_bundle(
            bundle,
            header,
            sections,
            provenance,
            onnx=onnx,
            properties=properties,
            timestamp=timestamp,
            stop=bundle_stop(token),
        )
    except BundleStepStopped:
        return None


def route_bundle(
    loaded: LoadedRecipe, route_name: str, route: RouteModel, state: CheckpointState, roots: RouteRoots
) -> RouteBundle:
    """The route's bundle at `route.bundle`, with a result that says `error` until a step says otherwise."""
    result = RouteBuildResult(route_name, "error", "", str(loaded.resolve(route.bundle)))
    return RouteBundle(loaded, route_name, route, state, roots, result)


def checkpoint_url(route: RouteModel, state: CheckpointState) -> str | None:
    """The checkpoint's page at the exact commit, for a Hugging Face cache layout (None for a local folder)."""
    if state.layout.kind == "hf_cache" and route.checkpoint and route.checkpoint.id and state.commit:
        return f"https://huggingface.co/{route.checkpoint.id}/tree/{state.commit}"
    return None


def checkpoint_sections(state: CheckpointState, config_bytes: bytes, tokenizer_bytes: bytes | None) -> dict[str, bytes]:
    """The bundle sections a checkpoint's route carries from the checkpoint, engine or not: config.json,
    tokenizer.json when the checkpoint has one, and its deployment files (tokenizer settings, sentence-transformers
    pooling, …)."""
    sections = {"config.json": config_bytes}
    if tokenizer_bytes is not None:
        sections["tokenizer.json"] = tokenizer_bytes
    sections.update(deployment_sections(state))
    return sections


def publish_bundle(
    bundle: RouteBundle,
    header: Mapping[str, Any],
    sections: Mapping[str, Any],
    provenance: dict[str, Any],
    *,
    onnx: sbom_mod.FileDigest,
    engine_file: str | None = None,
    engine_sizes: Mapping[str, int] | None = None,
    properties: Mapping[str, str],
    timestamp: datetime,
    stop: Callable[[], None] = lambda: None,
) -> BundleDigests:
    """Keep the previous bundle when the route asks (and it verifies), write the bundle atomically, then its SBOM
    beside it; `bundle.result` records each. The SBOM's builder and plugin libraries are the ones `provenance`
    records. `engine_file` names the engine section's file in the SBOM (None: no engine); `engine_sizes` is filled
    while the engine section streams (its size is known only after the write). Every file is written inside the
    folder `bundle.roots` fixed for it; an OSError (a refusal of the door too) is TRT412 on the key that names the
    file, and what was there before is whole. `stop()` raises to stop the step (a route build's stop): asked before
    anything is written and through the bundle's write until its rename (`write_bundle`), so a stop leaves the bundle
    as it was, never a part of a new one."""
    route, state, roots, result = bundle.route, bundle.state, bundle.roots, bundle.result
    bundle_path = bundle.path
    stop()
    if bundle_path.is_file() and route.previous_bundle and roots.previous is not None:
        previous = bundle.loaded.resolve(route.previous_bundle)
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
        digests = write_bundle(
            bundle_path, dict(header), dict(sections), provenance=provenance, within=roots.bundle, stop=stop
        )
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
        checkpoint_id=(route.checkpoint.id if route.checkpoint else None) or bundle.route_name,
        checkpoint_revision=state.commit or (route.checkpoint.revision if route.checkpoint else "export"),
        checkpoint_files=[sbom_mod.FileDigest(rel, f["sha256"], f["size"]) for rel, f in sorted(state.files.items())],
        builder_name=str(provenance["builder"]),
        builder_version=str(provenance["builder_version"]),
        trtls_version=__version__,
        onnx=onnx,
        engine=engine,
        checkpoint_license=checkpoint_licence(state),
        checkpoint_url=checkpoint_url(route, state),
        properties=dict(properties),
        timestamp=timestamp,
        plugins=[  # each library the engine loads (route.plugins); a route with no engine records none
            sbom_mod.FileDigest(Path(p["library"]).name, p["sha256"].split(":")[-1], p["size"])
            for p in provenance.get("plugins", ())
        ],
    )
    try:
        sbom_mod.write_sbom(sbom_mod.sbom_path(bundle_path), doc, within=roots.bundle)
    except OSError as exc:
        raise write_refused(exc, "the bundle's SBOM", ("bundle",)) from None
    result.sbom = str(sbom_mod.sbom_path(bundle_path))
    return digests
