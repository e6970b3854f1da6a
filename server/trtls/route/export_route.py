"""A route from a model that ships only as an export: an ONNX file, the golden outputs someone recorded by running the
original model, and optionally its tokenizer files — no checkpoint (`[routes.X]` with no `checkpoint`).

What stands in for the checkpoint is the set of files shipped (`read_export`): the ONNX, the golden outputs file and
each `tokenizer_files` entry, each hashed and read through one descriptor that does not follow a symlink, named by its
path relative to the recipe. Their digest is recorded where a checkpoint's files digest is (the bundle provenance's
`checkpoint_files_sha256`, with `source = "export"`), so gate 3's `bundle.provenance.checkpoint` sees a changed file.

`build_export_route` writes the bundle: the ONNX as shipped (`model.onnx`, never rewritten: nothing is exported), each
tokenizer file under its file name, and no `config.json` (an export has none); sidecar and SBOM as for any route.
Gates that read a checkpoint are `not_checked` by name (`trtls.gates.export_source`, docs/gates.md)."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Any

from trtls.checkpoint.layout import Layout
from trtls.core.cancel import CancelToken
from trtls.core.paths import real
from trtls.core.recipe import LoadedRecipe
from trtls.core.route import RouteModel
from trtls.fs import TooLarge, read_bytes
from trtls.route.checkpoint import CheckpointState, files_digest
from trtls.route.errors import RouteBuildError
from trtls.route.exporters import onnx_io_map
from trtls.route.onnx_route import onnxruntime_fields
from trtls.route.publish import publish_unless_stopped, route_bundle
from trtls.route.result import RouteBuildResult
from trtls.route.writes import RouteRoots

MAX_EXPORT = 4 * 1024 * 1024 * 1024  # the ONNX is read whole (it is the bundle's model.onnx)
MAX_SIDE_FILE = 64 * 1024 * 1024  # golden outputs and tokenizer files


def export_files(route: RouteModel) -> list[tuple[str, tuple[str, ...], int]]:
    """(path relative to the recipe, the route key that names it, size limit) of every file the export ships."""
    out: list[tuple[str, tuple[str, ...], int]] = [(str(route.onnx), ("onnx",), MAX_EXPORT)]
    if route.golden_outputs is not None:
        out.append((route.golden_outputs.path, ("golden_outputs", "path"), MAX_SIDE_FILE))
    out += [(rel, ("tokenizer_files", str(i)), MAX_SIDE_FILE) for i, rel in enumerate(route.tokenizer_files)]
    return out


def read_export(loaded: LoadedRecipe, route: RouteModel) -> tuple[CheckpointState, dict[str, bytes]]:
    """The export's files hashed (a CheckpointState with layout kind `export` and no commit) and their bytes;
    RouteBuildError, located on the key that names the file, when one is missing, too large, a link or unreadable."""
    base = real(loaded.base_dir)
    files: dict[str, dict[str, Any]] = {}
    paths: dict[str, Path] = {}
    data: dict[str, bytes] = {}
    for rel, key, limit in export_files(route):
        path = loaded.resolve(rel)
        try:
            content = read_bytes(path, limit=limit, follow=False)
        except TooLarge:
            raise RouteBuildError(f"{rel} is larger than {limit} bytes", key) from None
        except OSError as exc:  # missing, a FIFO, a device or a symlink
            raise RouteBuildError(f"{rel}: {exc.strerror or exc}", key) from None
        name = PurePosixPath(Path(rel).as_posix()).as_posix()
        files[name] = {"sha256": hashlib.sha256(content).hexdigest(), "size": len(content)}
        paths[name], data[name] = path, content
    layout = Layout("export", base, None, None)
    return CheckpointState(layout, None, files, paths, files_digest(files)), data


def build_export_route(
    loaded: LoadedRecipe,
    route_name: str,
    route: RouteModel,
    roots: RouteRoots,
    *,
    token: CancelToken | None = None,
) -> RouteBuildResult:
    """The bundle of a route from an export (module doc): the ONNX as shipped, its tokenizer files, no engine."""
    from trtls import __version__
    from trtls.bundle import sbom as sbom_mod

    token = token or CancelToken()
    state, data = read_export(loaded, route)
    bundle = route_bundle(loaded, route_name, route, state, roots)
    result = bundle.result
    if token.is_set:
        return bundle.stopped(token, "the export read")
    onnx_rel = PurePosixPath(Path(str(route.onnx)).as_posix()).as_posix()
    onnx_bytes = data[onnx_rel]
    try:
        io_map, precision = onnx_io_map(onnx_bytes, None)
    except Exception as exc:  # onnx's own DecodeError on a file that is not an ONNX model
        raise RouteBuildError(f"{route.onnx} is not an ONNX model onnx can read: {exc}", ("onnx",)) from None
    result.onnx = str(loaded.resolve(str(route.onnx)))
    onnx_sha = state.files[onnx_rel]["sha256"]
    created_at = datetime.now(UTC)
    runtime_header, runtime_provenance = onnxruntime_fields(route, created_at, precision, io_map)
    header = {"model_id": route_name, "model_type": "onnx-export", "family": "onnx-export", **runtime_header}
    golden = route.golden_outputs
    provenance = {
        "route": route_name,
        "source": "export",
        "checkpoint_id": None,
        "checkpoint_revision": None,
        "checkpoint_commit": None,
        "checkpoint_files_sha256": state.files_digest,  # the export's files: gate 3 compares them as a checkpoint's
        "checkpoint_files": {rel: f["sha256"] for rel, f in sorted(state.files.items())},
        "golden_outputs": None
        if golden is None
        else {
            "path": golden.path,
            "framework": golden.framework,
            "framework_version": golden.framework_version,
            "inputs_sha256": golden.inputs_sha256,
        },
        "build_id": None,
        "build_config_hash": None,
        "builder": "none (shipped as an export)",
        "builder_version": __version__,
        "onnx_sha256": onnx_sha,
        **runtime_provenance,
    }
    sections: dict[str, Any] = {"model.onnx": onnx_bytes}
    for rel in route.tokenizer_files:
        name = PurePosixPath(Path(rel).as_posix())
        if name.name in sections:
            raise RouteBuildError(f"two tokenizer files are named {name.name!r}", ("tokenizer_files",))
        sections[name.name] = data[name.as_posix()]
    # the route build's stop is seen until the bundle's rename: no bundle, never a partial one
    digests = publish_unless_stopped(
        bundle,
        token,
        header,
        sections,
        provenance,
        onnx=sbom_mod.FileDigest(Path(onnx_rel).name, onnx_sha, len(onnx_bytes)),
        properties={"route": route_name, "checkpoint_files_sha256": state.files_digest, "source": "export"},
        timestamp=created_at,
    )
    if digests is None:
        return bundle.stopped(token, "the bundle's write")
    result.outcome = "built"
    result.message = f"bundle written (the ONNX as shipped, no engine): {bundle.path} ({digests.size} bytes, " + (
        f"{result.bundle_digest})"
    )
    return result
