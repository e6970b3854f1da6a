"""The recipe checked against the ONNX models it names: located findings, before any build.

`check_recipe` is what every face uses (the editor as you type, `trtls check`, `trtls build` before it starts
a worker): the recipe loader's findings, plus, for every engine whose table is valid on its own, what the
model's declared inputs say (read by `onnx_reader`, cached by path, size and mtime):

  TRT110  not a valid ONNX model (wrong format, truncated) — on `onnx`
  TRT111  an external data file is missing or shorter than the model says — on `onnx`
  TRT112  a profile names an input the model does not have — on that name, with the closest name as a fix
  TRT113  a dynamic input is missing from a profile (or the engine has no profile) — on the profile, with a
          fix inserting the input with its dimensions filled from the model
  TRT114  a shape's rank differs from the input's — on that shape
  TRT115  a shape changes a dimension the model fixes — on that dimension

min ≤ opt ≤ max and positive dimensions are checked by the recipe loader (TRT105), model or not.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from trtls.core.findings import Finding, Origin, Severity, TomlPath
from trtls.core.paths import place
from trtls.core.recipe import SHAPE_KEYS, EngineRecipe, LoadedRecipe, OptimizationProfile, load_recipe
from trtls.core.write_policy import clash_findings
from trtls.onnx_files.fixes import insert_inputs_fix, insert_profile_fix, rename_fix
from trtls.onnx_files.onnx_reader import CACHE, GraphInput, ModelInputs, ModelInputsCache, NotOnnx


def _error(code: str, message: str, path: TomlPath, on_value: bool = False, **data: Any) -> Finding:
    return Finding(code, Severity.error, message, tuple(path), Origin.recipe, on_value, data)


def check_recipe(path: Path | str, text: str | None = None, cache: ModelInputsCache = CACHE) -> LoadedRecipe:
    """Load the recipe and check it against its models. `recipe` is None when anything is an error."""
    loaded = load_recipe(path, text)
    loaded.findings.extend(model_findings(loaded, cache))
    recipe = loaded.recipe
    if recipe is None and loaded.errors and all(f.code == "TRT123" for f in loaded.errors):
        recipe = loaded.validated_file()  # an output over a file that is no engine: is it a model's external data?
    if recipe is not None:  # the path policy, for the files only a model names (its external data)
        clash = clash_findings(loaded, recipe, external_data_files(loaded, cache))
        named = {f.path for f in clash}  # TRT109 says what the file is: it stands for the TRT123 on the same key
        loaded.findings[:] = [f for f in loaded.findings if not (f.code == "TRT123" and f.path in named)]
        loaded.findings.extend(clash)
    if loaded.errors:
        loaded.recipe = None
    return loaded


def external_data_files(loaded: LoadedRecipe, cache: ModelInputsCache = CACHE) -> dict[Path, str]:
    """Every external data file an engine's model reads (placed), with what it is: no write may land on one."""
    out: dict[Path, str] = {}
    for name, eng in valid_engines(loaded).items():
        model = engine_model(loaded, eng, cache)
        if model is None:
            continue
        for ext in model.external:
            try:
                out.setdefault(place(model.path.parent, ext.location), f"external data of engine '{name}'s model")
            except ValueError:
                continue
    return out


def valid_engines(loaded: LoadedRecipe) -> dict[str, EngineRecipe]:
    """Engines whose own table validates, even when another part of the recipe does not (checks while typing)."""
    if loaded.recipe is not None:
        return dict(loaded.recipe.engines)
    engines = loaded.data.get("engines") if isinstance(loaded.data, dict) else None
    out: dict[str, EngineRecipe] = {}
    for name, raw in (engines or {}).items() if isinstance(engines, dict) else ():
        try:
            out[str(name)] = EngineRecipe.model_validate(raw)
        except ValidationError:
            continue
    return out


def engine_model(loaded: LoadedRecipe, engine: EngineRecipe, cache: ModelInputsCache = CACHE) -> ModelInputs | None:
    """The engine's model inputs, or None when the file is missing or unreadable (reported elsewhere)."""
    try:
        return cache.get(loaded.resolve(engine.onnx))
    except (NotOnnx, OSError):
        return None


def model_findings(loaded: LoadedRecipe, cache: ModelInputsCache = CACHE) -> list[Finding]:
    out: list[Finding] = []
    for name, eng in valid_engines(loaded).items():
        base: TomlPath = ("engines", name)
        onnx = loaded.resolve(eng.onnx)
        if not onnx.is_file():
            continue  # TRT104 from the recipe loader
        try:
            model = cache.get(onnx)
        except NotOnnx as exc:
            out.append(_error("TRT110", f"not a valid ONNX model: {onnx}: {exc}", base + ("onnx",), True))
            continue
        except OSError as exc:
            out.append(_error("TRT110", f"cannot read ONNX model {onnx}: {exc.strerror}", base + ("onnx",), True))
            continue
        for problem in model.external_problems():
            out.append(_error("TRT111", problem, base + ("onnx",), True))
        out.extend(profile_findings(loaded, name, eng, model))
    return out


def profile_findings(loaded: LoadedRecipe, engine: str, eng: EngineRecipe, model: ModelInputs) -> list[Finding]:
    base: TomlPath = ("engines", engine)
    dynamic = [i for i in model.inputs if i.is_dynamic]
    if not eng.profiles:
        if not dynamic:
            return []
        listed = ", ".join(f"{i.name} {i.shape_text()}" for i in dynamic)
        return [
            _error(
                "TRT113",
                f"the model has dynamic inputs ({listed}); TensorRT needs an optimization profile giving "
                "min/opt/max for each",
                base,
                missing=[i.name for i in dynamic],
                fix=insert_profile_fix(loaded, engine, dynamic),
            )
        ]
    out: list[Finding] = []
    for index, prof in enumerate(eng.profiles):
        ppath = base + ("profiles", index)
        given = prof.shapes()
        for name, shapes in given.items():
            declared = model.input(name)
            if declared is None:
                out.append(_unknown_input(loaded, prof, ppath, name, model))
                continue
            shape_base = base + prof.shape_path(index, name)
            out.extend(_shape_against_model(declared, shapes.model_dump(), shape_base))
        missing = [i for i in dynamic if i.name not in given]
        if missing:
            names = ", ".join(f"'{i.name}' {i.shape_text()}" for i in missing)
            out.append(
                _error(
                    "TRT113",
                    f"profile {index} has no shapes for dynamic input{'s' if len(missing) > 1 else ''} {names}; "
                    "every profile must give min/opt/max for every dynamic input",
                    ppath,
                    missing=[i.name for i in missing],
                    fix=insert_inputs_fix(loaded, engine, index, prof, missing, model.inputs),
                )
            )
    return out


def _unknown_input(
    loaded: LoadedRecipe, prof: OptimizationProfile, ppath: TomlPath, name: str, model: ModelInputs
) -> Finding:
    hint = difflib.get_close_matches(name, model.names, n=1, cutoff=0.5)
    known = ", ".join(model.names) or "none"
    message = f"the model has no input '{name}' (inputs: {known})" + (f"; did you mean '{hint[0]}'?" if hint else "")
    if prof.is_shorthand:
        path, on_value = ppath + ("input",), True
    else:
        path, on_value = ppath + ("inputs", name), False
    data: dict[str, Any] = {"input": name, "suggestion": hint[0] if hint else None}
    if hint:
        data["fix"] = rename_fix(loaded, path, on_value, name, hint[0])
    return _error("TRT112", message, path, on_value, **data)


def _shape_against_model(declared: GraphInput, shapes: dict[str, list[int]], shape_base: TomlPath) -> list[Finding]:
    if declared.dims is None:
        return []  # the model declares no shape: nothing to compare
    out: list[Finding] = []
    for key in SHAPE_KEYS:
        shape = shapes[key]
        if len(shape) != len(declared.dims):
            out.append(
                _error(
                    "TRT114",
                    f"'{key}' has rank {len(shape)}; input '{declared.name}' is {declared.shape_text()} "
                    f"(rank {len(declared.dims)})",
                    shape_base + (key,),
                    True,
                )
            )
            continue
        for j, (dim, want) in enumerate(zip(shape, declared.dims, strict=True)):
            if want.is_static and dim != want.value:
                out.append(
                    _error(
                        "TRT115",
                        f"'{key}' dimension {j} is {dim}; input '{declared.name}' {declared.shape_text()} fixes it at "
                        f"{want.value}",
                        shape_base + (key, j),
                        True,
                        expected=want.value,
                    )
                )
    return out
