"""What the farm tables' schema cannot say, each as a located finding (TRT170–TRT179).

A matrix is checked cell by cell before anything is submitted: every axis value must be a valid builder
setting, every profile variant a valid profile, every cell its own output — a bad table is an error on the
exact key, and no cell of the recipe starts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from trtls.core.build_config import BuilderSettings
from trtls.core.farm import AXES, Cell, expand, template_fields
from trtls.core.findings import Finding, Origin, Severity, TomlPath
from trtls.core.paths import is_safe_name, safe_name
from trtls.core.profiles import OptimizationProfile, profile_findings
from trtls.core.validation import findings_from_validation

if TYPE_CHECKING:
    from trtls.core.recipe import EngineRecipe, LoadedRecipe, RecipeFile


def _f(code: str, msg: str, path: TomlPath, on_value: bool = True, severity: Severity = Severity.error) -> Finding:
    return Finding(code, severity, msg, tuple(path), Origin.recipe, on_value)


def farm_checks(loaded: LoadedRecipe, recipe: RecipeFile) -> list[Finding]:
    out: list[Finding] = []
    outputs: dict[Any, str] = {loaded.resolve(e.output): name for name, e in recipe.engines.items()}
    for name, eng in recipe.engines.items():
        base: TomlPath = ("engines", name)
        if eng.run_on is not None and recipe.cluster is None:
            out.append(
                _f(
                    "TRT175",
                    "run_on has no effect without a [cluster] table: this engine builds on this machine",
                    base + ("run_on",),
                    False,
                    Severity.warning,
                )
            )
        if eng.matrix is None:
            if eng.run_on is not None:
                out.extend(_label_placeholders(eng, base, {"engine", "cell"}))
            continue
        out.extend(_matrix_checks(loaded, name, eng, base, outputs))
    return out


def _matrix_checks(
    loaded: LoadedRecipe, name: str, eng: EngineRecipe, base: TomlPath, outputs: dict[Any, str]
) -> list[Finding]:

    m = eng.matrix
    assert m is not None
    mpath = base + ("matrix",)
    out: list[Finding] = []
    axes = [a for a in AXES if getattr(m, a) is not None]
    if not axes:
        out.append(_f("TRT174", "the matrix has no axis: add e.g. compute_capabilities = [...]", mpath, False))
    for axis in axes:
        if not getattr(m, axis):
            out.append(_f("TRT174", f"matrix axis '{axis}' has no values", mpath + (axis,)))
    # every value must be what the engine's own table would accept; a variant's name becomes a path component
    for axis in ("profiles", "precision"):
        for variant in getattr(m, axis) or {}:
            if not is_safe_name(variant):
                out.append(
                    _f(
                        "TRT119",
                        f"{axis} variant name {variant!r} cannot be part of a file name (cell names, build "
                        f"ids, outputs): use letters, digits, '_', '-', '.' (e.g. {safe_name(variant)!r})",
                        mpath + (axis, variant),
                        False,
                    )
                )
    for axis in axes:
        values = getattr(m, axis)
        if axis == "profiles":
            for variant, profs in values.items():
                for i, prof in enumerate(profs):
                    ppath = mpath + ("profiles", variant, i)
                    try:  # a variant's profile is held to what an engine's own profile is (the cell builds it)
                        out.extend(profile_findings(OptimizationProfile.model_validate(prof), ppath))
                    except ValidationError as exc:
                        out.extend(findings_from_validation(exc, ppath, OptimizationProfile))
        elif axis == "precision":
            for variant, onnx in values.items():
                if not loaded.resolve(onnx).is_file():
                    out.append(
                        _f(
                            "TRT173",
                            f"ONNX file of precision '{variant}' not found: {loaded.resolve(onnx)}",
                            mpath + ("precision", variant),
                        )
                    )
        else:
            for i, value in enumerate(values):
                key = "memory_pool_limits" if axis == "workspace_mib" else axis
                v = {"workspace_mib": value} if axis == "workspace_mib" else value
                if axis == "compute_capabilities" and not isinstance(value, list):
                    v = [value]
                try:
                    BuilderSettings.model_validate({key: v})
                except ValidationError as exc:
                    msg = exc.errors()[0]["msg"]
                    out.append(_f("TRT172", f"matrix {axis}[{i}] = {value!r}: {msg}", mpath + (axis, i)))
    try:
        used = template_fields(m.output)
    except ValueError as exc:
        return out + [_f("TRT170", f"output template is malformed: {exc}", mpath + ("output",))]
    known = {"engine", "cell", *axes}
    for ph in used:
        if ph not in known:
            out.append(
                _f(
                    "TRT170",
                    f"output template uses '{{{ph}}}', which is not an axis (use: {', '.join(sorted(known))})",
                    mpath + ("output",),
                )
            )
    out.extend(_label_placeholders(eng, base, known))
    if any(f.severity == Severity.error for f in out):
        return out
    cells = expand(name, m, eng.run_on)
    missing = [a for a in axes if len(getattr(m, a)) > 1 and a not in used and "cell" not in used]
    seen: dict[Any, Cell] = {}
    for cell in cells:
        path = loaded.resolve(cell.output)
        if path in seen:
            hint = f" (the template does not use {', '.join('{' + a + '}' for a in missing)})" if missing else ""
            out.append(
                _f(
                    "TRT171",
                    f"cells {seen[path].name} and {cell.name} would write the same file {cell.output}{hint}",
                    mpath + ("output",),
                )
            )
            break
        if path in outputs and outputs[path] != name:
            out.append(
                _f(
                    "TRT171",
                    f"cell {cell.name} writes {cell.output}, engine '{outputs[path]}'s output",
                    mpath + ("output",),
                )
            )
            break
        seen[path] = cell
    return out


def _label_placeholders(eng: EngineRecipe, base: TomlPath, known: set[str]) -> list[Finding]:
    out: list[Finding] = []
    for label, value in (eng.run_on.labels if eng.run_on else {}).items():
        try:
            used = template_fields(value)
        except ValueError as exc:
            out.append(_f("TRT176", f"label value is malformed: {exc}", base + ("run_on", "labels", label)))
            continue
        for ph in used:
            if ph not in known:
                out.append(
                    _f(
                        "TRT176",
                        f"label '{label}' uses '{{{ph}}}', which is not a matrix axis of this engine",
                        base + ("run_on", "labels", label),
                    )
                )
    return out
