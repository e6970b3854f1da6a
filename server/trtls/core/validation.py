"""Pydantic errors as located findings: the one translation every recipe model uses (engines, routes, farm tables),
so a wrong key, type or value is shown on the exact TOML key with a 'did you mean' hint, a value of the wrong type in
one sentence whatever the type (`_must_be`: `'name' must be a string, not the number 3`), an either/or field's wrong
value as one message naming the field; and `RECIPE_TABLE`, the configuration the recipe's tables share."""

from __future__ import annotations

import datetime
import difflib
import math
import re
import types
from functools import lru_cache
from typing import Annotated, Any, Literal, Union, get_args, get_origin, overload

from pydantic import AfterValidator, BaseModel, ConfigDict, TypeAdapter, ValidationError
from pydantic_core import PydanticCustomError

from trtls.core.findings import Finding, Origin, Severity, TomlPath

# Every table of the recipe (an engine's: the engine, its builder, precision, plugins, profiles, matrix, run_on, triage
# and timing cache; [store], [evidence], [cluster]; a route's: [routes.NAME], its tolerances, thresholds, precision,
# canary plan, …): an unknown key is an error (TRT101), a loaded table never changes, and a value of the wrong TOML
# type is an error (TRT102), never converted: pydantic's lax mode read `optimization_level = "3"` as 3, `keep_evidence =
# "yes"` as true, `max = [8.0]` as [8], `warmup = "50"` as 50. An integer is still a number (`cancel_grace_s = 10`):
# strict mode takes an int for a float. TOML's `inf`, `-inf` and `nan` (and `1e999`, read as inf) are refused in every
# number field (TRT102): an infinite tolerance or threshold passes every measurement, an infinite timeout or grace
# never ends, a nan compares false with every bound (`gt=0` is no guard against it).
RECIPE_TABLE = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)


def _non_finite_in(value: Any, at: tuple[str | int, ...] = ()) -> tuple[tuple[str | int, ...], float] | None:
    """The first inf, -inf or nan anywhere in a free-form value (tables and arrays walked), with its path in it."""
    if isinstance(value, float) and not math.isfinite(value):
        return at, value
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list | tuple) else ()
    for key, item in items:
        if (found := _non_finite_in(item, (*at, key))) is not None:
            return found
    return None


def _finite_table(value: dict[str, Any]) -> dict[str, Any]:
    found = _non_finite_in(value)
    if found is not None:  # located on the key that holds it (`findings_from_validation` appends `at`)
        raise PydanticCustomError("finite_number", "not a finite number", {"at": found[0], "value": found[1]})
    return value


# A table whose keys the recipe does not fix (a route's `runtime_options`, `[cluster] runtime_env`): no number in it,
# however deep, is inf, -inf or nan — the rule RECIPE_TABLE gives every typed number (`timeout_s = inf` never ended)
FreeTable = Annotated[dict[str, Any], AfterValidator(_finite_table)]


def _finding(code: str, message: str, path: TomlPath, on_value: bool = False, **data: Any) -> Finding:
    return Finding(code, Severity.error, message, tuple(path), Origin.recipe, on_value, data)


def findings_from_validation(exc: ValidationError, prefix: TomlPath, root: Any) -> list[Finding]:
    """Turn pydantic errors into located findings (shared by engine and route models)."""
    out: list[Finding] = []
    for err in _unions_named([dict(e) for e in exc.errors()], root):
        within = (err.get("ctx") or {}).get("at") if err["type"] == "finite_number" else None
        if within is not None:  # in a free-form table (FreeTable): the key that holds the number, however deep
            err["loc"], err["input"] = (*err["loc"], *within), err["ctx"]["value"]
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
            msg = f"'{_key(loc)}' must be one of {expected}, not {err.get('input')!r}"
            out.append(_finding("TRT106", msg, loc, True, options=options, suggestion=hint[0] if hint else None))
        elif kind == _EITHER and name != "":  # an either/or field
            out.append(_finding("TRT102", _either_message(loc, err), loc, True))
        elif kind in _TYPE_WORDS and name != "":  # a value of the wrong kind, or a number that is not finite
            wanted = _field_words(root, tuple(err["loc"]), kind)
            out.append(_finding("TRT102", _must_be(loc, wanted, err.get("input"), [kind]), loc, True))
        else:
            msg = f"'{_key(loc)}': {err['msg']} (got {shown_value(err.get('input'))!r})" if name != "" else err["msg"]
            out.append(_finding("TRT102", msg, loc, True))
    return out


# what a value of each pydantic type error should have been, in TOML's words, and how a string holding such a value is
# spelled (`optimization_level = "3"`: write 3 without quotes)
_TYPE_WORDS: dict[str, tuple[str, re.Pattern[str] | None]] = {
    "int_type": ("an integer", re.compile(r"[+-]?\d+")),
    "float_type": ("a number", re.compile(r"[+-]?\d+(\.\d+)?([eE][+-]?\d+)?")),
    "bool_type": ("true or false", re.compile(r"true|false")),
    "finite_number": ("a finite number", None),  # inf, -inf, nan (RECIPE_TABLE's allow_inf_nan=False)
    "string_type": ("a string", None),
    "list_type": ("an array", None),
    "tuple_type": ("an array", None),
    "set_type": ("an array", None),
    "frozen_set_type": ("an array", None),
    "dict_type": ("a table", None),
    "model_type": ("a table", None),
    "model_attributes_type": ("a table", None),
}
_KIND_OF = {int: "int_type", float: "float_type", bool: "bool_type"}
_PLURAL: dict[Any, str] = {int: "integers", float: "numbers", bool: "booleans", str: "strings"}
_SHOWN_CHARS = 80  # a longer string given is cut: the message stays one readable line


def _key(loc: TomlPath) -> str:
    """The key as the person wrote it: a list's item is named by its index (`max[0]`, `compute_capabilities[1]`)."""
    at = len(loc)
    while at > 1 and isinstance(loc[at - 1], int):
        at -= 1
    return str(loc[at - 1]) + "".join(f"[{i}]" for i in loc[at:]) if loc else ""


def _must_be(loc: TomlPath, wanted: str, value: Any, kinds: list[str]) -> str:
    """The one sentence for a value a key does not take, whatever its type: the key, what it must be, what was given
    (`'name' must be a string, not the number 3`; `'optimization_level' must be an integer, not the string '3' (write
    3 without quotes)`; `'atol' must be a finite number, not inf`; an either/or field: `'num_gpus' must be a number
    or 'auto', not true`). A string that spells a value of one of `kinds` says to write it without quotes."""
    return f"'{_key(loc)}' must be {wanted}, not {_shown(value, kinds)}"


def _shown(value: Any, kinds: list[str]) -> str:
    """The value given, in TOML's words: `the string '3'`, `the number 3`, `true`, `inf`, `a table`, `an array`."""
    if isinstance(value, str):
        spells = [p for k in kinds if (p := _TYPE_WORDS.get(k, ("", None))[1]) is not None]
        spelled = any(p.fullmatch(value.strip()) for p in spells)
        return f"the string {_quoted(value)}" + (f" (write {value.strip()} without quotes)" if spelled else "")
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and not math.isfinite(value):  # as TOML spells them
        return "nan" if math.isnan(value) else "inf" if value > 0 else "-inf"
    if isinstance(value, int | float):
        return f"the number {value!r}"
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list | tuple):
        return "an array"
    if isinstance(value, datetime.datetime):  # TOML's date and time values (a datetime is a date too: first)
        return f"the date-time {value.isoformat()}"
    if isinstance(value, datetime.date):
        return f"the date {value.isoformat()}"
    if isinstance(value, datetime.time):
        return f"the time {value.isoformat()}"
    return _quoted(str(value))


def _quoted(text: str) -> str:
    """`text` in quotes as an error echoes it: a URL's secret replaced (`shown_value`), every control character,
    escape and bidi override written visibly (`repr`: `\\x1b`, `\\u202e`), a long one cut."""
    text = shown_value(text)
    return repr(text if len(text) <= _SHOWN_CHARS else text[: _SHOWN_CHARS - 1] + "…")


def _field_words(root: Any, loc: tuple[Any, ...], kind: str) -> str:
    """What the field at `loc` takes, from its annotation where that is plain (`an array of strings`), else what the
    error's kind says (an either/or member's item, a validator's own type: `a string`)."""
    found = _annotation_at(root, loc)
    if kind != "finite_number" and found is not None and found[0] == len(loc):
        words = _words(found[1], default=None)
        if words is not None:
            return words
    return _TYPE_WORDS[kind][0]


# An either/or field (`num_gpus = 1` or `"auto"`, `fail_regex` a pattern or a list of them): pydantic refuses a value
# once per member, each error's loc holding the member's tag (`num_gpus.float`, `num_gpus.literal['auto']`), so the
# messages named the tags. `_unions_named` turns them into one error on the field (kind _EITHER) naming what it takes;
# a validator that reads either of two shapes itself (`abort_if`, `reference_inputs`) raises one: `either_error`.
_EITHER = "either_type"


def either_error(wanted: str) -> PydanticCustomError:
    """What a validator raises for a value neither of its shapes takes: `'abort_if' must be {wanted}, not 5`."""
    return PydanticCustomError(_EITHER, "must be {wanted}", {"wanted": wanted})


def _unions_named(errors: list[dict[str, Any]], root: Any) -> list[dict[str, Any]]:
    """The errors, each either/or field's member errors regrouped in the place of its first (`_one_of`)."""
    grouped: dict[Any, list[dict[str, Any]]] = {}  # a plain error alone (keyed by its index), a field's members by it
    for i, err in enumerate(errors):
        loc = tuple(err["loc"])
        found = _union_at(root, loc)
        if found is None:
            grouped[i] = [err]
        else:
            at, members = found
            member = {**err, "loc": loc[:at] + loc[at + 1 :], "member": loc[at], "members": members}
            grouped.setdefault(loc[:at], []).append(member)
    return [e for key, errs in grouped.items() for e in (errs if isinstance(key, int) else _one_of(key, errs))]


def _one_of(field: tuple[Any, ...], errors: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """An either/or field's member errors, located without the tag: those of the member whose shape the value has (an
    array whose item is wrong, a number out of bounds), else one _EITHER error naming the field and its members."""
    by_member: dict[Any, list[dict[str, Any]]] = {}
    for err in errors:
        by_member.setdefault(err["member"], []).append(err)
    for errs in by_member.values():
        if any(len(e["loc"]) > len(field) or _fits(e) for e in errs):
            return errs
    first = errors[0]  # every error is on the field itself: its input is the value
    return [{"type": _EITHER, "loc": field, "input": first.get("input"), "members": first["members"], "msg": ""}]


def _fits(err: dict[str, Any]) -> bool:
    """Whether the value had this member's type and failed on something else (a bound, a pattern)."""
    kind = str(err["type"])
    return not (kind.endswith("_type") or kind in ("literal_error", "enum", "is_instance_of", "none_required"))


def _plain(ann: Any) -> Any:
    """The type without Annotated's constraints and without `| None`."""
    while True:
        if hasattr(ann, "__metadata__"):
            ann = get_args(ann)[0]
        elif _is_union(ann) and len(_members(ann)) == 1:
            ann = _members(ann)[0]
        else:
            return ann


def _is_union(ann: Any) -> bool:
    return get_origin(ann) in (Union, types.UnionType)


def _members(ann: Any) -> tuple[Any, ...]:
    return tuple(a for a in get_args(ann) if a is not type(None)) if _is_union(ann) else (ann,)


def _annotation_at(root: Any, loc: tuple[Any, ...]) -> tuple[int, Any] | None:
    """The annotation of what `loc` names under `root` (a model), as (len(loc), it); or the first either/or field on
    the way, as (where it stands in `loc`, the union); None where `loc` leaves the annotations (an `Any` value)."""
    ann: Any = root
    for i, part in enumerate(loc):
        ann = _plain(ann)
        if len(_members(ann)) > 1:
            return i, ann
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            field = ann.model_fields.get(str(part))
            ann = field.annotation if field is not None else None
        elif get_origin(ann) in (list, tuple, set, frozenset) and isinstance(part, int) and get_args(ann):
            ann = get_args(ann)[0]
        elif get_origin(ann) is dict and len(get_args(ann)) == 2:
            ann = get_args(ann)[1]
        else:
            return None
    return len(loc), _plain(ann)


def _union_at(root: Any, loc: tuple[Any, ...]) -> tuple[int, tuple[Any, ...]] | None:
    """Where in `loc` the member tag of the either/or field the error is in stands, and the field's members."""
    found = _annotation_at(root, loc)
    if found is None or found[0] == len(loc):
        return None
    at, union = found  # a part that is no tag: a validator's own error inside the field (a named input set)
    return (at, _members(union)) if loc[at] in _tags(union) else None


def _tags(union: Any) -> frozenset[Any]:
    try:
        return _cached_tags(union)
    except TypeError:  # an unhashable annotation
        return _cached_tags.__wrapped__(union)


@lru_cache(maxsize=64)
def _cached_tags(union: Any) -> frozenset[Any]:
    """The tags pydantic names the union's members by: those a value no member takes is refused with."""
    try:
        TypeAdapter(union).validate_python(object())
    except ValidationError as exc:
        return frozenset(e["loc"][0] for e in exc.errors() if e["loc"])
    return frozenset()


def _either_message(loc: TomlPath, err: dict[str, Any]) -> str:
    """`'num_gpus' must be a number or 'auto', not the string '2' (write 2 without quotes)`."""
    members = err.get("members", ())
    words = [_words(m) for m in members]
    wanted = " or ".join(words) if len(words) < 3 else ", ".join(words[:-1]) + " or " + words[-1]
    wanted = str((err.get("ctx") or {}).get("wanted", wanted))
    plain = [_plain(m) for m in members]  # a string that spells a member's value: unless a string is one too
    kinds = [k for m in plain if (k := _KIND_OF.get(m)) is not None] if str not in plain else []
    return _must_be(loc, wanted, err.get("input"), kinds)


@overload
def _words(ann: Any) -> str: ...
@overload
def _words(ann: Any, default: None) -> str | None: ...
def _words(ann: Any, default: Any = ...) -> str | None:
    """A type in TOML's words: `a number`, `'auto'`, `an array of strings`, `a table`; `default` for one it does not
    know (else `a <name>`)."""
    ann = _plain(ann)
    if ann in _KIND_OF:
        return _TYPE_WORDS[_KIND_OF[ann]][0]
    if ann is str:
        return "a string"
    if get_origin(ann) is Literal:
        options = ", ".join(f"'{o}'" for o in get_args(ann))
        return options if len(get_args(ann)) == 1 else f"one of {options}"
    if get_origin(ann) in (list, tuple, set, frozenset):
        item: Any = _plain(get_args(ann)[0]) if get_args(ann) else None
        plural = "tables" if _is_table(item) else _PLURAL.get(item)
        return "an array" + (f" of {plural}" if plural else "")
    if _is_table(ann):
        return "a table"
    return f"a {getattr(ann, '__name__', ann)}" if default is ... else default


def _is_table(ann: Any) -> bool:
    return get_origin(ann) is dict or ann is dict or (isinstance(ann, type) and issubclass(ann, BaseModel))


_USERINFO = re.compile(r"(?<=://)[^/@\s]*@")


def shown_value(value: Any) -> Any:
    """The value an error echoes, with a URL's user name and password replaced: a recipe's secret is never printed
    (the error about the secret itself included)."""
    return _USERINFO.sub("…@", value) if isinstance(value, str) else value


def _allowed_keys(table: TomlPath, root: Any) -> list[str]:
    """Field names of the model that owns `table`, for 'did you mean' hints."""
    found = _annotation_at(root, tuple(table))
    model = found[1] if found is not None and found[0] == len(table) else None
    return list(model.model_fields) if isinstance(model, type) and issubclass(model, BaseModel) else []


def model_in(annotation: Any) -> Any:
    """The BaseModel class inside `X | None` or `list[X]`, if any."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()) or ():
        found = model_in(arg)
        if found is not None:
            return found
    return None
