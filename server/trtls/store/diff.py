"""What changed between two engine keys, by name: the answer to "why was this rebuilt?".

One function computes it (`key_changes`); the evidence, the CLI and the editor's hint render its lines."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trtls.core.protocol import stable_json


def _short(value: Any) -> str:
    text = stable_json(value) if not isinstance(value, str) else value
    return text if len(text) <= 40 else text[:37] + "…"


def _name(paths: dict[str, Any], role: str, fallback: str) -> str:
    p = paths.get(role)
    return Path(p).name if isinstance(p, str) else fallback


def key_changes(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """`["onnx demo.onnx bytes changed", "optimization_level 3 → 5", …]`; empty when the keys are equal."""
    out: list[str] = []
    of, nf = old.get("files") or {}, new.get("files") or {}
    paths = new.get("paths") or {}
    if of.get("onnx") != nf.get("onnx"):
        out.append(f"onnx {_name(paths, 'onnx', 'model')} bytes changed")
    oe, ne = of.get("external") or {}, nf.get("external") or {}
    for loc in sorted(set(oe) | set(ne)):
        if loc not in oe:
            out.append(f"external data {loc} added")
        elif loc not in ne:
            out.append(f"external data {loc} removed")
        elif oe[loc] != ne[loc]:
            out.append(f"external data {loc} bytes changed")
    for role, label in (("plugin_libraries", "plugin library"), ("plugin_serialize", "serialized plugin")):
        o, n = of.get(role) or [], nf.get(role) or []
        if o != n:
            names = [Path(p).name for p in (paths.get(role) or [])]
            out.append(f"{label} {', '.join(names) or '(none)'} changed")
    os_, ns = old.get("settings") or {}, new.get("settings") or {}
    for k in sorted(set(os_) | set(ns)):
        if os_.get(k) != ns.get(k):
            out.append(f"{k} {_short(os_.get(k))} → {_short(ns.get(k))}")
    op, np_ = old.get("profiles") or [], new.get("profiles") or []
    if len(op) != len(np_):
        out.append(f"profiles {len(op)} → {len(np_)}")
    else:
        for i, (a, b) in enumerate(zip(op, np_, strict=True)):
            out.extend(_profile_changes(i, a, b))
    for section in ("precision", "plugins"):
        o, n = old.get(section) or {}, new.get(section) or {}
        for k in sorted(set(o) | set(n)):
            if o.get(k) != n.get(k):
                out.append(f"{section}.{k} {_short(o.get(k))} → {_short(n.get(k))}")
    ob, nb = old.get("builder") or {}, new.get("builder") or {}
    if (ob.get("module"), ob.get("version")) != (nb.get("module"), nb.get("version")):
        out.append(
            f"builder {ob.get('module')} {_short(ob.get('version'))} → {nb.get('module')} {_short(nb.get('version'))}"
        )
    elif ob.get("libraries") != nb.get("libraries"):  # the same version, other library bytes (replaced in place)
        out.append(_library_change(nb.get("module"), ob.get("libraries") or {}, nb.get("libraries") or {}))
    ot, nt = old.get("target") or {}, new.get("target") or {}
    for k in sorted(set(ot) | set(nt)):
        if ot.get(k) != nt.get(k):
            out.append(f"target {k} {_short(ot.get(k))} → {_short(nt.get(k))}")
    for k in ("format", "protocol"):
        if old.get(k) != new.get(k):
            out.append(f"{k} {old.get(k)} → {new.get(k)}")
    return out


def _library_change(module: Any, old: dict[str, Any], new: dict[str, Any]) -> str:
    """`builder tensorrt_rtx library libtensorrt_rtx.so.1 bytes changed` (each library that differs, by name)."""
    if not old or not new:
        return f"builder {module} libraries {'now' if new else 'no longer'} in the key"
    names = sorted(Path(n).name for n in set(old) | set(new) if old.get(n) != new.get(n))
    return f"builder {module} library {', '.join(names)} bytes changed"


def _profile_changes(index: int, a: Any, b: Any) -> list[str]:
    if a == b:
        return []
    if not (isinstance(a, dict) and isinstance(b, dict)):
        return [f"profile {index} changed"]
    a, b = _by_input(a), _by_input(b)
    out = []
    for name in sorted(set(a) | set(b)):
        x, y = a.get(name), b.get(name)
        if x == y:
            continue
        if isinstance(x, dict) and isinstance(y, dict):
            for shape in sorted(set(x) | set(y)):
                if x.get(shape) != y.get(shape):
                    out.append(f"profile {index} {name}.{shape} {_short(x.get(shape))} → {_short(y.get(shape))}")
        else:
            out.append(f"profile {index} {name} {_short(x)} → {_short(y)}")
    return out


def _by_input(profile: dict[str, Any]) -> dict[str, Any]:
    """A job profile (`{"inputs": [{"input": name, "min": …}, …]}`) as `{name: {"min": …, …}}`."""
    inputs = profile.get("inputs")
    if isinstance(inputs, list) and all(isinstance(i, dict) and "input" in i for i in inputs):
        return {str(i["input"]): {k: v for k, v in i.items() if k != "input"} for i in inputs}
    return profile
