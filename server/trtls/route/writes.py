"""Every write of a route build, through the door (`trtls.fs`): the folders they must stay in (fixed when the build
starts, after the path policy judged the route), the records under `.trtls/routes/<route>/`, and the rule for the
ONNX a route build exports.

The export rule (issue 27 item 7): `onnx` is an input under `[engines]` and an output of a route build, so the file
at the export path may be the user's own model. An existing file there is replaced only when trtls wrote it — its
sha256 is one a route build of this recipe recorded (`exports.json`, or an older build's `route-build.json`) — or
the route says `overwrite = true`; an export identical to the file writes nothing. Otherwise the build stops before
anything is written, located on the route's `onnx` (or `engine`) key: TRT122, which `trtls check` already warned
about.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trtls import fs
from trtls.core.paths import real, write_root
from trtls.core.recipe import LoadedRecipe
from trtls.core.route import RouteModel, route_dir, route_names
from trtls.core.route_checks import (
    EXPORTS_RECORD,
    RECORD_LIMIT,
    bundle_sidecar,
    export_record_key,
    recorded_exports,
)
from trtls.fs import Kind, parse_json, read_text
from trtls.route.errors import RouteBuildError

ROUTE_RECORD = "route-build.json"


@dataclass(frozen=True)
class RouteRoots:
    """The folder each write of one route build must stay in (`within` of the door), judged once when it starts: a
    folder swapped for a symlink during the build is refused at the write, never followed."""

    state: Path  # the recipe's real folder: `.trtls/routes/<route>/` records
    bundle: Path  # the bundle, its sidecar and its SBOM
    previous: Path | None  # the previous bundle kept for rollback
    export: Path | None  # the ONNX the route exports


def route_roots(loaded: LoadedRecipe, route: RouteModel, export_rel: str | None) -> RouteRoots:
    def root(rel: str | None) -> Path | None:
        return write_root(loaded.base_dir, loaded.resolve(rel)) if rel else None

    bundle = root(route.bundle)
    assert bundle is not None
    return RouteRoots(real(loaded.base_dir), bundle, root(route.previous_bundle), root(export_rel))


def write_refused(exc: OSError, what: str, key: tuple[Any, ...]) -> RouteBuildError:
    """TRT412, located on the route key that names the file: an OSError (a refusal of the door included) while a
    route build wrote `what`. What was there before is whole: every write is atomic."""
    why = exc.strerror or str(exc)
    where = f" ({exc.filename})" if exc.filename else ""
    return RouteBuildError(f"TRT412 {what} cannot be written{where}: {why}; the file there is unchanged", key)


def write_record(loaded: LoadedRecipe, route_name: str, name: str, data: dict[str, Any], within: Path) -> Path:
    """`.trtls/routes/<route>/<name>`, atomically, inside the recipe's real folder."""
    folder = route_dir(loaded, route_name)
    fs.ensure_folder(folder, within=within)
    path = folder / name
    fs.atomic_write_text(path, json.dumps(data, indent=2, default=str) + "\n", kind=Kind.evidence, within=within)
    return path


def _read_record(path: Path) -> Any:
    try:
        return parse_json(read_text(path, limit=RECORD_LIMIT))
    except (OSError, ValueError, RecursionError):  # RecursionError: JSON nested deeper than the parser's stack
        return None


def _sha_of(path: Path, what: str, key: tuple[Any, ...]) -> str | None:
    """sha256 of the regular file at `path` (never through a symlink), None when there is none."""
    h = hashlib.sha256()
    try:
        with fs.open_regular(path, limit=None, follow=False) as fh:
            while part := fh.read(1024 * 1024):
                h.update(part)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise write_refused(exc, what, key) from None
    return h.hexdigest()


def _written_by_trtls(loaded: LoadedRecipe, path: Path, sha: str) -> bool:
    names = route_names(loaded)
    if any(e.get("sha256") == sha for e in recorded_exports(loaded, names).get(export_record_key(loaded, path), [])):
        return True
    for name in names:  # a route build before exports.json: its record names the ONNX it exported and its sha256
        rec = _read_record(route_dir(loaded, name) / ROUTE_RECORD)
        if not isinstance(rec, dict) or not isinstance(prov := rec.get("provenance"), dict):
            continue
        if Path(str(rec.get("onnx"))).name == path.name and prov.get("onnx_sha256") == sha:
            return True
    return False


def refuse_foreign_bundle(loaded: LoadedRecipe, route_name: str, route: RouteModel) -> None:
    """The bundle rule, the export rule's twin: a file already at the route's `bundle` path is replaced only when
    trtls wrote it — the sidecar trtls writes beside every bundle (`origin: trtls`) records its sha256 — or the route
    says `overwrite = true`. A user's file there, or a foreign bundle promoted as found (`trtls bundle promote`), is
    refused before anything is built or written: TRT122 on the route's `bundle` key."""
    if route.overwrite:
        return
    from trtls.bundle.format import sidecar_path

    path = loaded.resolve(route.bundle)
    current = _sha_of(path, f"the bundle of route '{route_name}'", ("bundle",))
    if current is None:
        return
    sidecar, why = bundle_sidecar(path)
    if sidecar is not None and sidecar.get("file_sha256") == current:
        return
    why = why or f"its sidecar {sidecar_path(path)} records another file, not this sha256 {current[:12]}…"
    raise RouteBuildError(
        f"TRT122 {path} already exists and trtls did not write it ({why}): not replaced, nothing was written. Move "
        f"it, point the route's bundle elsewhere, or set overwrite = true in [routes.{route_name}]",
        ("bundle",),
    )


def export_key(route: RouteModel) -> tuple[str]:
    """The route key that names the export path (relative to `routes.<name>`)."""
    return ("onnx",) if route.engine is None else ("engine",)


def write_export(
    loaded: LoadedRecipe, route_name: str, route: RouteModel, path: Path, data: bytes, roots: RouteRoots
) -> None:
    """Put the exported ONNX at `path` by the export rule (module doc), then record it in `exports.json`."""
    key = export_key(route)
    what = f"the ONNX model route '{route_name}' exports"
    sha = hashlib.sha256(data).hexdigest()
    current = _sha_of(path, what, key)
    if current != sha:
        if current is not None and not route.overwrite and not _written_by_trtls(loaded, path, current):
            raise RouteBuildError(
                f"TRT122 {path} already exists and trtls did not write it (its sha256 {current[:12]}… is not one a "
                "route build of this recipe recorded): not replaced, nothing was written. Move it, point the route "
                f"elsewhere, or set overwrite = true in [routes.{route_name}]",
                key,
            )
        assert roots.export is not None
        try:
            fs.ensure_folder(path.parent, within=roots.export)
            fs.atomic_write_bytes(path, data, kind=Kind.route_artefact, within=roots.export)
        except OSError as exc:
            raise write_refused(exc, what, key) from None
    record_export(loaded, route_name, path, sha, roots.state)


def record_export(loaded: LoadedRecipe, route_name: str, path: Path, sha: str, within: Path) -> None:
    """Add `path` (as it is now: sha256, size, mtime) to the route's `exports.json`, so the next build (and `trtls
    check`, by size and time) knows trtls wrote it."""
    try:
        st = path.lstat()
    except OSError:
        return
    rec = _read_record(route_dir(loaded, route_name) / EXPORTS_RECORD)
    files: dict[str, Any] = rec["files"] if isinstance(rec, dict) and isinstance(rec.get("files"), dict) else {}
    files[export_record_key(loaded, path)] = {
        "sha256": sha,
        "size": st.st_size,
        "mtime_ns": st.st_mtime_ns,
        "recordedAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    write_record(loaded, route_name, EXPORTS_RECORD, {"format": "trtls.route-exports/1", "files": files}, within)
