"""The located TRT1xx findings of `[routes.NAME]` tables: what `core.route.RouteModel`'s schema cannot say.

`core.route` is the typed route every gate reads; this is its validation as you type — a bad route name, an
undefined engine ("did you mean"), `engine`/`onnx` together or neither, `precision` on an engine route, golden
outputs without `reference = "golden"`, waivers without a reason, missing checkpoint, input-set and canary files,
unsafe set names, a rollback bundle that is the bundle itself, an export that would replace a file trtls did not
write (TRT122) — each underlining the exact key or value. `core.recipe` runs it in its second pass; it only reads
the file system (which files exist, their size and time) and trtls's own small records, never a model's content.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from trtls.core.findings import Finding, Origin, Severity, TomlPath
from trtls.core.loads_on import target_findings
from trtls.core.paths import inside, is_safe_name, real, safe_name
from trtls.core.route import RouteModel, export_route_findings, input_set_paths, route_dir
from trtls.core.validation import findings_from_validation

if TYPE_CHECKING:
    from trtls.core.recipe import LoadedRecipe, RecipeFile

ROUTE_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")
EXPORTS_RECORD = "exports.json"  # .trtls/routes/<route>/: every file the route's builds exported, as written
RECORD_LIMIT = 4 * 1024 * 1024  # the most an exports record can hold (it lists a few files)


def _finding(
    code: str, message: str, path: TomlPath, on_value: bool = True, severity: Severity = Severity.error, **data: Any
) -> Finding:
    return Finding(code, severity, message, tuple(path), Origin.recipe, on_value, data)


def validate_routes(loaded: LoadedRecipe, recipe: RecipeFile) -> list[Finding]:
    """Located TRT1xx findings for every `[routes.NAME]` table (schema, then names and files)."""

    out: list[Finding] = []
    for name, raw in recipe.routes.items():
        base: TomlPath = ("routes", name)
        if not ROUTE_NAME.match(name) or not is_safe_name(name):  # it names .trtls/routes/<route>/
            out.append(_finding("TRT108", f"route name '{name}' must be letters, digits, '_', '-', '.'", base, False))
        try:
            route = RouteModel.model_validate(raw)
        except ValidationError as exc:
            out.extend(findings_from_validation(exc, base, RouteModel))
            engine = raw.get("engine") if isinstance(raw, dict) else None
            if isinstance(engine, str) and engine not in recipe.engines:
                out.append(_engine_finding(recipe, base, engine))
            continue
        out.extend(_semantic(loaded, recipe, name, route))
    return out


def _engine_finding(recipe: RecipeFile, base: TomlPath, engine: str) -> Finding:
    import difflib

    known = list(recipe.engines)
    hint = difflib.get_close_matches(engine, known, n=1)
    msg = f"engine '{engine}' not defined" + (
        f"; did you mean '{hint[0]}'?" if hint else f" (engines: {', '.join(known) or 'none'})"
    )
    return _finding("TRT107", msg, base + ("engine",), options=known, suggestion=hint[0] if hint else None)


def _semantic(loaded: LoadedRecipe, recipe: RecipeFile, name: str, route: RouteModel) -> list[Finding]:
    base: TomlPath = ("routes", name)
    out: list[Finding] = []
    if route.engine is not None and route.engine not in recipe.engines:
        out.append(_engine_finding(recipe, base, route.engine))
    elif route.engine is not None and route.targets:  # will the engine load on them (core.loads_on)
        out.extend(target_findings(name, route.targets, route.engine, recipe.engines[route.engine]))
    out.extend(_export_finding(loaded, recipe, name, route))
    out.extend(_bundle_finding(loaded, name, route))
    if route.engine is None and route.onnx is None:
        out.append(
            _finding(
                "TRT103",
                "a route needs `engine` (it deploys that TensorRT engine) or `onnx` (it deploys the ONNX model)",
                base,
                False,
                key="engine",
            )
        )
    if route.engine is not None and route.onnx is not None:
        out.append(
            _finding(
                "TRT109",
                "`onnx` is for a route with no engine: this route deploys engine "
                f"'{route.engine}', whose ONNX is `engines.{route.engine}.onnx`",
                base + ("onnx",),
            )
        )
    if route.engine is not None and route.precision is not None:
        out.append(
            _finding(
                "TRT109",
                f"`precision` is for a route with no engine: this route deploys engine '{route.engine}', whose "
                f"conversion is `[engines.{route.engine}.precision]`",
                base + ("precision",),
                False,
            )
        )
    if route.bundle_format == "trtmc" and route.engine is None:
        out.append(
            _finding(
                "TRT109",
                'bundle_format = "trtmc" is for a route that deploys an engine: TensorRT Model Connect\'s runtime '
                "loads TensorRT engines, not an ONNX model",
                base + ("bundle_format",),
            )
        )
    if route.reference == "golden" and route.golden_outputs is None:
        out.append(
            _finding(
                "TRT103", 'reference = "golden" needs `golden_outputs`', base + ("reference",), key="golden_outputs"
            )
        )
    if route.golden_outputs is not None:
        if route.reference != "golden":
            out.append(
                _finding("TRT109", 'golden_outputs is used only with reference = "golden"', base + ("golden_outputs",))
            )
        golden = loaded.resolve(route.golden_outputs.path)
        if not golden.is_file():
            out.append(
                _finding(
                    "TRT104",
                    f"golden outputs file not found: {golden}",
                    base + ("golden_outputs", "path"),
                    resolved=str(golden),
                )
            )
    for reason_key, reason in route.waive.items():
        if not reason.strip():
            out.append(
                _finding(
                    "TRT102",
                    f"waiver of '{reason_key}' needs a reason (recorded in the evidence)",
                    base + ("waive", reason_key),
                )
            )
    ckpt = loaded.resolve(route.checkpoint.path) if route.checkpoint else None
    if route.checkpoint is None:
        out += export_route_findings(loaded, route, base)  # the files it ships must be there
    elif ckpt is not None and not ckpt.is_dir():
        what = "is not a folder" if ckpt.exists() else "not found"
        out.append(
            _finding("TRT104", f"checkpoint folder {what}: {ckpt}", base + ("checkpoint", "path"), resolved=str(ckpt))
        )
    files: list[tuple[str, str, TomlPath]] = [
        (f"reference inputs file{f' of set {set_name!r}' if route.named_input_sets else ''}", rel, where)
        for set_name, rel, where in input_set_paths(route, base)
    ]
    if route.canary_inputs is not None:
        files.append(("canary inputs file", route.canary_inputs, base + ("canary_inputs",)))
    for set_name in route.input_sets if route.named_input_sets else ():
        if not is_safe_name(set_name):
            out.append(
                _finding(
                    "TRT119",
                    f"input set name {set_name!r} cannot name evidence: use letters, digits, '_', '-', '.' "
                    f"(e.g. {safe_name(set_name)!r})",
                    base + ("reference_inputs", set_name),
                    False,
                    suggestion=safe_name(set_name),
                )
            )
    for what, rel, where in files:
        if not loaded.resolve(rel).is_file():
            out.append(
                _finding("TRT104", f"{what} not found: {loaded.resolve(rel)}", where, resolved=str(loaded.resolve(rel)))
            )
    bundle = loaded.resolve(route.bundle)
    if bundle.is_dir():
        out.append(_finding("TRT109", f"bundle is a directory: {bundle}", base + ("bundle",)))
    if route.previous_bundle is not None and loaded.resolve(route.previous_bundle) == bundle:
        out.append(
            _finding(
                "TRT109",
                "previous_bundle is the bundle itself: rollback needs a different artifact",
                base + ("previous_bundle",),
            )
        )
    if (
        route.checkpoint
        and route.checkpoint.id is not None
        and not re.match(r"^[A-Za-z0-9][A-Za-z0-9_.-]*(/[A-Za-z0-9][A-Za-z0-9_.-]*)?$", route.checkpoint.id)
    ):
        out.append(
            _finding("TRT102", f"checkpoint id '{route.checkpoint.id}' is not `org/name`", base + ("checkpoint", "id"))
        )
    tol = route.tolerances
    for out_name, t in tol.items():
        if t.check_error_stat == "quantile" and t.quantile is None:
            out.append(
                _finding(
                    "TRT103",
                    "check_error_stat = \"quantile\" needs 'quantile'",
                    base + ("tolerances", out_name),
                    False,
                    key="quantile",
                )
            )
    return out


def export_record_key(loaded: LoadedRecipe, path: Path) -> str:
    """How an exports record names a file: its path relative to the recipe's real folder (so a copied or moved
    checkout keeps knowing what trtls wrote), or the absolute path of one `allow_outside` lets out."""
    root = real(loaded.base_dir)
    return path.relative_to(root).as_posix() if inside(path, root) else str(path)


def recorded_exports(loaded: LoadedRecipe, routes: Iterable[str]) -> dict[str, list[dict[str, Any]]]:
    """`export_record_key` → every {sha256, size, mtime_ns} the routes' builds recorded writing there (routes may
    share an export, so each route's record counts). Records are read bounded, never through a symlink; a bad one is
    none."""
    from trtls.fs import parse_json, read_text

    out: dict[str, list[dict[str, Any]]] = {}
    for name in routes:
        if not isinstance(name, str) or not ROUTE_NAME.match(name) or not is_safe_name(name):
            continue
        try:
            data = parse_json(read_text(route_dir(loaded, name) / EXPORTS_RECORD, limit=RECORD_LIMIT))
        except (OSError, ValueError, RecursionError):  # RecursionError: JSON nested deeper than the parser's stack
            continue
        files = data.get("files") if isinstance(data, dict) else None
        for path, entry in files.items() if isinstance(files, dict) else ():
            if isinstance(entry, dict) and isinstance(entry.get("sha256"), str):
                out.setdefault(path, []).append(entry)
    return out


def export_target(recipe: RecipeFile, name: str, route: RouteModel) -> tuple[str | None, TomlPath]:
    """The path `trtls route build` exports the route's ONNX to, and the route key that names it: `onnx` for a
    route with no engine, else its engine's `onnx` (named by the route's `engine`)."""
    base: TomlPath = ("routes", name)
    if route.engine is None:
        return route.onnx, base + ("onnx",)
    engine = recipe.engines.get(route.engine)
    return (engine.onnx if engine is not None else None), base + ("engine",)


def bundle_sidecar(bundle: Path) -> tuple[dict[str, Any] | None, str]:
    """The sidecar trtls writes beside every bundle it writes (`<bundle>.trtls.json`, `origin: trtls`), read through
    the door (a regular file, never through a symlink, bounded); or None and why not, naming the sidecar. The one
    reader of the rule "a bundle trtls wrote": `trtls check` compares its size, `route build` its sha256."""
    from trtls.core.paths import BUNDLE_SIDECAR_SUFFIX
    from trtls.fs import parse_json, read_text

    side = bundle.with_name(bundle.name + BUNDLE_SIDECAR_SUFFIX)
    try:
        sidecar = parse_json(read_text(side, limit=RECORD_LIMIT))
    except FileNotFoundError:
        return None, f"no sidecar {side} of a bundle trtls wrote"
    except OSError as exc:
        return None, f"its sidecar {side} cannot be read: {exc.strerror or exc}"
    except (ValueError, RecursionError):  # RecursionError: JSON nested deeper than the parser's stack
        return None, f"its sidecar {side} is not JSON"
    if not isinstance(sidecar, dict) or sidecar.get("origin") != "trtls":
        return None, f"its sidecar {side} is not one trtls wrote"
    return sidecar, ""


def _regular_file(path: str | os.PathLike[str]) -> os.stat_result | None:
    """The lstat of a route output that is a regular file; None when there is nothing there, or a symlink or a folder
    (the write policy's TRT118 / TRT109 say those at the route build)."""
    try:
        st = os.lstat(path)
    except (OSError, ValueError):
        return None
    return st if stat.S_ISREG(st.st_mode) else None


def _bundle_finding(loaded: LoadedRecipe, name: str, route: RouteModel) -> list[Finding]:
    """TRT122 (a warning), the bundle's twin of the export's: a regular file at the bundle path with no sidecar of a
    bundle trtls wrote, of its size, beside it. `trtls route build` hashes it against that sidecar and refuses to
    replace it (route.writes.refuse_foreign_bundle); here only sizes are compared, as this runs on every keystroke."""
    if route.overwrite or not route.bundle:
        return []
    path = loaded.resolve(route.bundle)
    st = _regular_file(path)
    if st is None:
        return []
    sidecar, _ = bundle_sidecar(path)
    if sidecar is not None and sidecar.get("size") == st.st_size:
        return []
    return [
        _finding(
            "TRT122",
            f"route '{name}' writes its bundle to {path}, which already exists and trtls did not write it (no sidecar "
            "of a bundle trtls wrote beside it): `trtls route build` will not replace it. Move it, point the route's "
            f"bundle elsewhere, or set overwrite = true in [routes.{name}]",
            ("routes", name, "bundle"),
            severity=Severity.warning,
            resolved=str(path),
        )
    ]


def _export_finding(loaded: LoadedRecipe, recipe: RecipeFile, name: str, route: RouteModel) -> list[Finding]:
    """TRT122 (a warning: the recipe is sound, the route build refuses): the export path holds a regular file no
    route build of this recipe recorded writing (size and time differ from every record), and `overwrite` is off.
    `trtls route build` hashes it and replaces it only when a record has its sha256 or the export is identical."""
    rel, where = export_target(recipe, name, route)
    if route.overwrite or not rel:
        return []
    path = loaded.resolve(rel)
    st = _regular_file(path)
    if st is None:
        return []
    known = recorded_exports(loaded, recipe.routes).get(export_record_key(loaded, path), [])
    if any(e.get("size") == st.st_size and e.get("mtime_ns") == st.st_mtime_ns for e in known):
        return []
    return [
        _finding(
            "TRT122",
            f"route '{name}' exports its ONNX to {path}, which already exists and no route build of this recipe "
            "recorded writing it: `trtls route build` will not replace it (unless the export is byte-identical). "
            f"Move it, point the route elsewhere, or set overwrite = true in [routes.{name}]",
            where,
            severity=Severity.warning,
            resolved=str(path),
        )
    ]
