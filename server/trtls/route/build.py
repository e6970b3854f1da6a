"""`trtls route build`: a route's checkpoint → ONNX → engine (the build core) → `.bundle` + sidecar + SBOM.

    result = await build_route("samples/route/trtls.toml", "tiny", view=PlainView)   # library API
    trtls route build [RECIPE] --route NAME                                          # CLI (trtls.cli.route)

Steps, in order; nothing is promoted unless every step succeeds:

1. **Read the checkpoint as data** (gate 1's `resolve_layout` / `list_files`: contained, symlinks out of it
   refused, nothing imported or unpickled). Every file is hashed (`hashing.hash_files`, digest cache) and
   the files digest is computed exactly as gate 1 computes its lock digest. The files the bundle embeds or
   the exporter reads (config.json, tokenizer.json, *.safetensors) are read once, through one
   `O_NOFOLLOW` descriptor, and their bytes must hash to the recorded digest.
2. **Export ONNX** to the path the route's engine recipe names (`[engines.X].onnx`), atomically, only if
   the bytes differ, and never over a file trtls did not write unless the route says `overwrite = true`
   (`route.writes`: TRT122). Exporters are chosen by config.json `model_type` (`EXPORTERS`): `tiny-mlp` / `mlp`
   = a chain `fc1 … fcN` of Gemm layers with Relu between, from safetensors weights (the sample's
   make_onnx.py, generalised to N layers); `bert` = a Hugging Face BERT encoder (`route.bert_export`), with the
   `sentence_embedding` a sentence-transformers checkpoint's modules.json declares (`route.pooling`; recorded in
   the provenance as `pooling`). Other model types are refused with a message.
3. **Build the engine** through `build.supervisor.Supervisor` (real TensorRT / TensorRT-RTX in a worker
   process): the live phase tree goes to `view(build)`; `on_build(build)` may add listeners or cancel.
4. **Write the bundle** atomically with `bundle.write_bundle`: sections `engine`, `model.onnx`,
   `config.json`, `tokenizer.json` (with `bundle_format = "trtmc"`: TensorRT Model Connect's layout,
   `route.trtmc_layout`, an engine with the I/O its BERT runtime feeds, `route.trtmc_export`, and no
   `model.onnx`); header model_id, model_type, family, trt_version (builder version from
   the build evidence), trt_abi, gpu_name (or "none (AOT CPU build)"), created_at, precision,
   runtime_strategy, io_map (the engine's I/O as the build recorded it: `exporters.engine_io`); provenance
   (header `trtls.provenance` and sidecar) = checkpoint id, revision, commit, files digest + per-file sha256,
   build id, buildConfigHash, builder module + version, ONNX and engine sha256. The engine is streamed from one
   open descriptor and must hash to the build's recorded `engineArtifact.sha256`, else nothing is written.
5. **SBOM**: CycloneDX 1.5 beside the bundle, `<bundle>.cdx.json` (`sbom.make_sbom` / `write_sbom`).

Previous bundle (rollback): when the route sets `previous_bundle`, no file exists there yet, and the bundle
path already holds a bundle that verifies, that bundle (with its sidecar and SBOM) is copied atomically to
`previous_bundle` before the new one replaces it. An existing `previous_bundle` is never overwritten (it is
the release you roll back to; move it yourself to promote a newer one). Without `previous_bundle` the old
bundle is simply replaced.

A cancelled, failed, forced or killed build — or any error before the bundle is written — leaves the
existing bundle, sidecar, SBOM and previous bundle untouched (the engine file is protected by the build
core the same way). Each run records `.trtls/routes/<route>/route-build.json`. Every write goes through the door
(`trtls.fs`) inside the folder the path policy judged when the build started (`route.writes.RouteRoots`).
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from trtls.bundle import CHECK_SECTION_DIGEST, BundleError, BundleProblem
from trtls.bundle.sbom import SBOM_SUFFIX, sbom_path
from trtls.core.cancel import CancelToken
from trtls.core.paths import real
from trtls.core.recipe import EngineRecipe, LoadedRecipe, load_recipe
from trtls.core.route import route_model, route_names
from trtls.core.write_policy import route_write_findings
from trtls.fs import open_regular
from trtls.route.checkpoint import (
    CheckpointState,
    checkpoint_provenance,
    files_digest,
    model_identity,
    read_checkpoint,
    read_route_inputs,
    read_verified,
)
from trtls.route.errors import RouteBuildError, recipe_errors
from trtls.route.exporters import EXPORTERS, engine_io, export_mlp, export_onnx, onnx_io_map
from trtls.route.plugins import plugin_provenance
from trtls.route.pooling import sentence_pooling
from trtls.route.publish import BundleStepStopped, bundle_stop, checkpoint_sections, publish_bundle, route_bundle
from trtls.route.result import RouteBuildResult
from trtls.route.trtmc_export import check_profiles
from trtls.route.trtmc_layout import trtmc_layout, trtmc_strategy
from trtls.route.writes import ROUTE_RECORD, refuse_foreign_bundle, route_roots, write_export, write_record

__all__ = [
    "EXPORTERS",
    "SBOM_SUFFIX",
    "CheckpointState",
    "RouteBuildError",
    "RouteBuildResult",
    "build_route",
    "export_mlp",
    "export_onnx",
    "files_digest",
    "read_checkpoint",
    "read_verified",
    "sbom_path",
]


def _engine_chunks(path: Path, expected_sha: str, sizes: dict[str, int]) -> Iterator[bytes]:
    """The engine file from one descriptor; raises (so nothing is written) unless it is the engine the build made."""
    h, size = hashlib.sha256(), 0
    with open_regular(path, limit=None, follow=False) as f:
        while part := f.read(1024 * 1024):
            h.update(part)
            size += len(part)
            yield part
    if h.hexdigest() != expected_sha:
        raise BundleError(
            [
                BundleProblem(
                    CHECK_SECTION_DIGEST,
                    f"engine {path} is not the engine build recorded (sha256 {h.hexdigest()[:12]}… vs "
                    f"{expected_sha[:12]}…)",
                    section="engine",
                )
            ]
        )
    sizes["engine"] = size


def load_route_recipe(recipe: str | os.PathLike[str] | LoadedRecipe) -> LoadedRecipe:
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
    cancel: CancelToken | None = None,
) -> RouteBuildResult:
    """Build the route's bundle (see the module docstring). Raises RouteBuildError for bad input before any build —
    after recording the refused run: every run is recorded in `.trtls/routes/<route>/route-build.json`.

    `cancel` stops the whole route build, whatever step it is in: the checkpoint read, the export and the conversion
    run off the event loop and check it between steps (the result is `cancelled` and nothing is written); during the
    engine build it is forwarded to the build, whose own cancel sources stay as they are.

    `faults` is passed to the build worker for the acceptance tests only (see docs/protocol.md); never from a recipe.
    """
    loaded = load_route_recipe(recipe)
    t0 = time.monotonic()
    known = route_name in route_names(loaded)
    try:
        result = await _build_route(
            loaded,
            recipe,
            route_name,
            view=view,
            on_build=on_build,
            overrides=overrides,
            use_digest_cache=use_digest_cache,
            faults=faults,
            token=cancel or CancelToken(),
        )
    except (RouteBuildError, BundleError, OSError) as exc:
        if known:
            outcome = "error" if isinstance(exc, RouteBuildError) else "failed"
            failed = RouteBuildResult(
                route_name, outcome, f"{exc}", str(loaded.resolve(str(_bundle_of(loaded, route_name))))
            )
            failed.duration_s = round(time.monotonic() - t0, 3)
            _record(loaded, route_name, failed)
        raise
    result.duration_s = round(time.monotonic() - t0, 3)
    _record(loaded, route_name, result)
    return result


def _bundle_of(loaded: LoadedRecipe, route_name: str) -> str:
    raw = (loaded.data.get("routes") or {}).get(route_name) if isinstance(loaded.data, dict) else None
    return str(raw.get("bundle", "")) if isinstance(raw, dict) else ""


async def _build_route(
    loaded: LoadedRecipe,
    recipe: str | os.PathLike[str] | LoadedRecipe,
    route_name: str,
    *,
    view: Callable[[Any], Any] | None,
    on_build: Callable[[Any], None] | None,
    overrides: dict[str, Any] | None,
    use_digest_cache: bool,
    faults: dict[str, Any] | None,
    token: CancelToken,
) -> RouteBuildResult:
    from trtls import __version__
    from trtls.builds.supervisor.supervisor import Supervisor
    from trtls.bundle import sbom as sbom_mod

    try:
        route = route_model(loaded, route_name)
    except (KeyError, ValueError) as exc:
        raise RouteBuildError(f"route {route_name!r}: {exc}") from None
    refused = route_write_findings(loaded, route_name)  # the path policy, before anything is exported or written
    if refused:
        f = refused[0]
        raise RouteBuildError(f"{f.code} {f.message}", tuple(f.path[2:]))  # located under routes.<name>
    refuse_foreign_bundle(loaded, route_name, route)  # a file at the bundle path trtls did not write stays
    if route.from_export:  # a model shipped as an ONNX with golden outputs: nothing to export, no engine
        from trtls.route.export_route import build_export_route

        return await asyncio.to_thread(
            build_export_route, loaded, route_name, route, route_roots(loaded, route, None), token=token
        )
    if route.engine is None:  # the route deploys its ONNX itself: no engine to build
        from trtls.route.onnx_route import build_onnx_route

        # off the event loop: a Ctrl-C (the CLI's loop handler) or another request is seen while it reads and exports
        return await asyncio.to_thread(
            build_onnx_route,
            loaded,
            route_name,
            route,
            route_roots(loaded, route, route.onnx),
            use_digest_cache=use_digest_cache,
            token=token,
        )
    raw_engine = (loaded.data.get("engines") or {}).get(route.engine) if isinstance(loaded.data, dict) else None
    if loaded.recipe is None and not (isinstance(raw_engine, dict) and _onnx_only_errors(loaded, route.engine)):
        raise recipe_errors(loaded)
    engine = loaded.engine(route.engine) if loaded.recipe is not None else EngineRecipe.model_validate(raw_engine)
    roots = route_roots(loaded, route, engine.onnx)  # judged by the policy above; every write stays in these

    # 1-2. checkpoint → ONNX, off the event loop so a stop is seen between the steps
    state, config, config_bytes, tokenizer_bytes = await asyncio.to_thread(
        read_route_inputs, loaded, route, use_digest_cache=use_digest_cache
    )
    bundle = route_bundle(loaded, route_name, route, state, roots)
    result = bundle.result
    if token.is_set:
        return bundle.stopped(token, "the checkpoint read")
    if tokenizer_bytes is None:
        result.notes.append(
            "the checkpoint has no tokenizer.json: the bundle carries none (gate 1 judges the tokenizer)"
        )
    strategy = trtmc_strategy(route, config)  # bundle_format = "trtmc": refused before any export or build
    onnx_path = loaded.resolve(engine.onnx)
    pooling = sentence_pooling(state)  # modules.json: the sentence_embedding users of the checkpoint deploy
    if strategy is not None:  # TRTMC feeds [n] int32 and reads one output: its contract, or nothing is built
        check_profiles(engine, route.engine)
        pooling = None  # TRTMC's bert_encoder_only serves token states; it pools nothing (route.trtmc_export)
    onnx_bytes = await asyncio.to_thread(export_onnx, state, config, pooling, trtmc=strategy is not None)
    await asyncio.to_thread(write_export, loaded, route_name, route, onnx_path, onnx_bytes, roots)
    result.onnx = str(onnx_path)
    if token.is_set:
        return bundle.stopped(token, "the ONNX export")
    io_map, precision = onnx_io_map(onnx_bytes, engine)
    if loaded.recipe is None or not isinstance(recipe, LoadedRecipe):
        loaded = load_recipe(loaded.path)  # the ONNX exists now; validate again before building
        if loaded.recipe is None:
            raise recipe_errors(loaded)

    # 3. engine, through the build core
    sup = Supervisor()
    build = sup.start(loaded, route.engine, overrides=overrides, faults=faults)
    result.build_id = build.id
    token.on_request(build.cancel)  # one cancel state: a later request on the route build stops the engine build
    if on_build is not None:
        on_build(build)
    shown = view(build) if view is not None else None
    if shown is not None:
        build.listeners.append(shown.update)
        with shown:
            while build.running:
                await asyncio.sleep(0.125)
                shown.tick()
            summary = await build.wait()  # the record the build just wrote, as it wrote it
    else:
        summary = await build.wait()
    result.build_summary_path = str(build.evidence_dir / "summary.json")
    result.cancel_source = summary.cancelSource
    if summary.outcome != "built":
        result.outcome = summary.outcome or "killed"
        result.message = f"build {build.outcome_message()}; the bundle was not touched"
        return result
    if token.is_set:  # a stop after the engine was built and before the bundle: the build's record stays, no bundle
        return bundle.stopped_after_build(token)
    artifact = summary.engineArtifact or {}
    if not artifact.get("sha256"):
        result.outcome, result.message = "failed", "the build recorded no engine artifact; the bundle was not touched"
        return result

    # 4. bundle
    engine_io(io_map, summary)  # the engine's I/O as the build recorded it: network dtypes, profiles held
    env = summary.environment
    module = summary.builderModule or (env.module if env else None) or "tensorrt"
    version = str(summary.tensorrtVersion or (env.version if env else None) or "unknown")
    onnx_sha = hashlib.sha256(onnx_bytes).hexdigest()
    created_at = datetime.now(UTC).replace(microsecond=0)
    header = {
        **model_identity(route, config, route_name),
        "trt_version": version,
        "trt_abi": f"{module}-{version.split('.')[0]}",
        "gpu_name": (env.device_name if env else None) or "none (AOT CPU build)",
        "created_at": created_at.isoformat().replace("+00:00", "Z"),
        "precision": precision,
        "runtime_strategy": f"{module}-engine",
        "io_map": io_map,
    }
    provenance = {
        **checkpoint_provenance(route, route_name, state),
        "build_id": summary.buildId,
        "build_config_hash": summary.buildConfigHash,
        "builder": module,
        "builder_version": version,
        "onnx_sha256": onnx_sha,
        "engine_sha256": artifact["sha256"],
        "trtls_version": __version__,
        **({"pooling": pooling.as_dict()} if pooling is not None else {}),  # gate 4's TRT816 checks it (modules.json)
        "plugins": plugin_provenance(loaded, route),  # each library the engine loads, by sha256 (gate 3: TRT710)
    }
    sizes: dict[str, int] = {}
    sections: dict[str, Any] = {
        "engine": _engine_chunks(Path(artifact.get("path") or build.output), artifact["sha256"], sizes),
        "model.onnx": onnx_bytes,
        **checkpoint_sections(state, config_bytes, tokenizer_bytes),
    }
    if strategy is not None:  # TensorRT Model Connect's layout (route.trtmc_layout)
        header, sections = trtmc_layout(
            header,
            sections,
            state,
            config,
            tokenizer_bytes,
            strategy=strategy,
            module=module,
            version=version,
            precision=precision,
        )

    # 5. the bundle and its SBOM (route.publish: the ONNX route writes through the same), off the event loop: the
    # route build's stop (a Ctrl-C, answered on the loop) is seen while the engine is read and the bundle written, and
    # stops the write before its rename — no bundle, never a partial one
    try:
        digests = await asyncio.to_thread(
            publish_bundle,
            bundle,
            header,
            sections,
            provenance,
            onnx=sbom_mod.FileDigest(onnx_path.name, onnx_sha, len(onnx_bytes)),
            engine_file=Path(build.output).name,
            engine_sizes=sizes,
            properties={
                "build_config_hash": str(summary.buildConfigHash),
                "build_id": str(summary.buildId),
                "route": route_name,
                "checkpoint_files_sha256": state.files_digest,
            },
            timestamp=created_at,
            stop=bundle_stop(token),
        )
    except BundleStepStopped:
        return bundle.stopped_after_build(token)
    result.outcome = "built"
    result.message = f"bundle written: {bundle.path} ({digests.size} bytes, {result.bundle_digest})"
    if token.is_set:  # after the bundle's rename: it stands, whole (its sidecar and SBOM are written with it)
        result.notes.append(f"a stop ({token.source}) came after the bundle was written: it stands, whole")
    return result


def _record(loaded: LoadedRecipe, route_name: str, result: RouteBuildResult) -> None:
    data = asdict(result)
    data["recordedAt"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    data["durationS"] = result.duration_s  # gate 5's cold build time for a route that builds no engine
    write_record(loaded, route_name, ROUTE_RECORD, data, real(loaded.base_dir))
