"""Pydantic errors as located findings: the one translation every recipe model uses (engines, routes, farm tables),
so a wrong key, type or value is shown on the exact TOML key with a 'did you mean' hint; and `RECIPE_TABLE`, the
configuration the recipe's tables share."""

from __future__ import annotations

import difflib
import re
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from trtls.core.findings import Finding, Origin, Severity, TomlPath

# Every table of an engine's recipe (the engine, its builder, precision, plugins, profiles, matrix, run_on, triage and
# timing cache; [store], [evidence], [cluster]; routes keep their own models): an unknown key is an error (TRT101), a
# loaded table never changes, and a value of the wrong TOML type is an error (TRT102), never converted: pydantic's lax
# mode read `optimization_level = "3"` as 3, `keep_evidence = "yes"` as true, `max = [8.0]` as [8]. An integer is
# still a number (`cancel_grace_s = 10`): strict mode takes an int for a float.
RECIPE_TABLE = ConfigDict(extra="forbid", frozen=True, strict=True)


def _finding(code: str, message: str, path: TomlPath, on_value: bool = False, **data: Any) -> Finding:
    return Finding(code, Severity.error, message, tuple(path), Origin.recipe, on_value, data)


def findings_from_validation(exc: ValidationError, prefix: TomlPath, root: Any) -> list[Finding]:
    """Turn pydantic errors into located findings (shared by engine and route models)."""
    out: list[Finding] = []
    for err in exc.errors():
        loc = prefix + tuple(err["loc"])
        kind = err["type"]
        name = loc[-1] if loc else ""
        if kind == "extra_forbidden":
            table = loc[:-1]
            allowed = _allowed_keys(table[len(prefix) :], root)
            hint = difflib.get_close_matches(str(name), allowed, n=1)
            msg = f"unknown key '{name}'" + (f"; did you mean '{hint[0]}'?" if hint else "")
            out.append(_finding("TRT101", msg, loc, key=str(name), suggestion=hint[0] if hint else None))
        elif kind == "missing":
            out.append(_finding("TRT103", f"missing required key '{name}'", loc, key=str(name)))
        elif kind in ("literal_error", "enum"):
            expected = err.get("ctx", {}).get("expected", "")
            options = re.findall(r"'([^']*)'", expected)
            hint = difflib.get_close_matches(str(err.get("input")), options, n=1)
            msg = f"'{name}' must be one of {expected}, not {err.get('input')!r}"
            out.append(_finding("TRT106", msg, loc, True, options=options, suggestion=hint[0] if hint else None))
        elif kind in _TOML_TYPES and name != "":
            out.append(_finding("TRT102", _type_message(loc, kind, err.get("input")), loc, True))
        else:
            msg = f"'{name}': {err['msg']} (got {shown_value(err.get('input'))!r})" if name != "" else err["msg"]
            out.append(_finding("TRT102", msg, loc, True))
    return out


# what a strict number or boolean field wants, in TOML's words, and how a string holding one is spelled
_TOML_TYPES = {
    "int_type": ("an integer", re.compile(r"[+-]?\d+")),
    "float_type": ("a number", re.compile(r"[+-]?\d+(\.\d+)?([eE][+-]?\d+)?")),
    "bool_type": ("true or false", re.compile(r"true|false")),
}


def _type_message(loc: TomlPath, kind: str, value: Any) -> str:
    """`'optimization_level' must be an integer, not the string '3' (write 3 without quotes)`; a list's item is named
    by its index (`'max[0]' must be an integer, not 8.0`)."""
    key = f"{loc[-2]}[{loc[-1]}]" if isinstance(loc[-1], int) and len(loc) > 1 else str(loc[-1])
    wanted, spelled = _TOML_TYPES[kind]
    if isinstance(value, str):
        shown = f"the string {shown_value(value)!r}"
        if spelled.fullmatch(value.strip()):
            shown += f" (write {value.strip()} without quotes)"
    elif isinstance(value, bool):
        shown = "true" if value else "false"
    elif isinstance(value, dict):
        shown = "a table"
    elif isinstance(value, list):
        shown = "an array"
    else:
        shown = repr(value)
    return f"'{key}' must be {wanted}, not {shown}"


_USERINFO = re.compile(r"(?<=://)[^/@\s]*@")


def shown_value(value: Any) -> Any:
    """The value an error echoes, with a URL's user name and password replaced: a recipe's secret is never printed
    (the error about the secret itself included)."""
    return _USERINFO.sub("…@", value) if isinstance(value, str) else value


def _allowed_keys(table: TomlPath, root: Any) -> list[str]:
    """Field names of the model that owns `table`, for 'did you mean' hints."""
    model: Any = root
    skip_next = False  # the key after a dict/list field is a name or an index, not a field
    for part in table:
        if skip_next:
            skip_next = False
            continue
        fields = getattr(model, "model_fields", {})
        if part not in fields:
            return []
        ann = fields[part].annotation
        skip_next = getattr(ann, "__origin__", None) in (dict, list) or "dict[" in str(ann) or "list[" in str(ann)
        model = model_in(ann)
        if model is None:
            return []
    return list(getattr(model, "model_fields", {}).keys())


def model_in(annotation: Any) -> Any:
    """The BaseModel class inside `X | None` or `list[X]`, if any."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()) or ():
        found = model_in(arg)
        if found is not None:
            return found
    return None
