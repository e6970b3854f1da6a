"""The runbook's reasons to pause a route, as checks: "custom kernels, TVM-FFI boundaries, precision changes and
engine portability are common reasons to pause".

* `plugins` (gate 3, TRT710): every plugin library the engine loads (`engines.X.plugins.libraries`) is described in
  `[routes.NAME.plugins]` with its source, build flags, version, review status and scan/signature result; its sha256
  is evidence, and must be the one the bundle's provenance recorded.
* `boundaries` (gate 2, TRT609): every FFI the runtime crosses (`ffi = [...]`, and `tvm-ffi` for the `trtmc` runtime)
  is named in `[routes.NAME.boundaries]` with an owner.
* `precision` (gate 4, TRT813): when the deployed artifact's precision differs from the checkpoint's (an fp16
  AutoCast, a quantized graph), the route holds until `tolerance_precision` says the tolerances were set for it
  (presets: `TOLERANCE_PRESETS`, reasoning in docs/gates.md).
* `portability` (gate 5, TRT911): the engine must load on the GPU its build asked TensorRT-RTX about ("engine
  portability", gates.engine_portability), and every GPU in `targets` must be one the engine loads on (core.loads_on)
  and was validated on (the deployed artifact executed on it, in this run); each other target holds, by name.

Each check is made only when there is something to judge (a library, an FFI, a precision change, a target, an
engine).
"""

from __future__ import annotations

from functools import partial
from typing import Any

from trtls.core.gate_result import CheckStatus, GateCheck, gate_check
from trtls.gates.context import GateContext

PLUGIN_FIELDS = ("source", "build_flags", "version", "review", "scan")
RUNTIME_FFI = {"trtmc": "tvm-ffi"}  # runtimes known to cross an FFI of their own
# Polygraphy-style tolerances that the precision's rounding allows (docs/gates.md, "Tolerance presets").
TOLERANCE_PRESETS: dict[str, dict[str, float]] = {
    "fp32": {"atol": 1e-5, "rtol": 1e-4},
    "tf32": {"atol": 1e-3, "rtol": 1e-3},
    "fp16": {"atol": 5e-3, "rtol": 5e-3},
    "bf16": {"atol": 2e-2, "rtol": 2e-2},
    "int8": {"atol": 5e-2, "rtol": 5e-2},
}
DTYPE_PRECISION = {"F32": "fp32", "F16": "fp16", "BF16": "bf16", "I8": "int8", "F64": "fp32"}
LOSS_ORDER = ("fp32", "tf32", "fp16", "bf16", "int8")  # least to most lossy


def plugin_checks(ctx: GateContext) -> list[GateCheck]:
    from trtls.gates.lifecycle.rested_on import bundle_digest

    route, name = ctx.route, ctx.route_name
    eng = ctx.loaded.recipe.engines.get(route.engine) if route.engine and ctx.loaded.recipe else None
    if eng is None or not eng.plugins.libraries:
        return []
    check = partial(gate_check, 3)
    described = {str(ctx.resolve(p.path)): (key, p) for key, p in route.plugins.items()}
    recorded = _bundle_plugins(ctx)
    out = []
    for i, lib in enumerate(eng.plugins.libraries):
        path = ctx.resolve(lib)
        digest = bundle_digest(path)
        evidence: dict[str, Any] = {"library": lib, "sha256": digest}
        key_entry = described.get(str(path))
        where = ("routes", name, "plugins")
        if key_entry is None:
            out.append(
                check(
                    f"plugins:{path.name}",
                    "hold",
                    f"the engine loads plugin library {lib} (engines.{route.engine}.plugins.libraries[{i}]), which "
                    f"[routes.{name}.plugins] does not describe: add its path, {', '.join(PLUGIN_FIELDS)}",
                    "TRT710",
                    ("routes", name),
                    evidence,
                    False,
                )
            )
            continue
        key, entry = key_entry
        missing = [f for f in PLUGIN_FIELDS if not (getattr(entry, f) or "").strip()]
        status: CheckStatus = "pass"
        message = f"plugin library {lib}: {entry.version}, {entry.review}, {entry.scan}"
        if digest is None:
            status, message = "hold", f"plugin library {lib} is not a readable file"
        elif missing:
            status, message = (
                "hold",
                f"plugin library {lib} is missing {', '.join(missing)} in [routes.{name}.plugins.{key}]",
            )
        elif recorded is not None and recorded.get(lib) != digest:
            status = "hold"
            message = (
                f"plugin library {lib} is {digest}, the bundle's provenance recorded {recorded.get(lib) or 'nothing'}: "
                f"rebuild the bundle (`trtls route build --route {name}`)"
            )
        out.append(check(f"plugins:{path.name}", status, message, "TRT710", where + (key,), evidence, False))
    return out


def _bundle_plugins(ctx: GateContext) -> dict[str, str] | None:
    try:
        from trtls.bundle import read_bundle

        header = read_bundle(ctx.resolve(ctx.route.bundle)).header
    except Exception:
        return None
    record = header.get("trtls") if isinstance(header, dict) else None
    prov = record.get("provenance") if isinstance(record, dict) else None
    plugins = prov.get("plugins") if isinstance(prov, dict) else None
    return {str(p.get("library")): str(p.get("sha256")) for p in plugins} if isinstance(plugins, list) else {}


def boundary_checks(ctx: GateContext) -> list[GateCheck]:
    route, name = ctx.route, ctx.route_name
    crossed = list(dict.fromkeys([*route.ffi, *([RUNTIME_FFI[route.runtime]] if route.runtime in RUNTIME_FFI else [])]))
    check = partial(gate_check, 2)
    out = []
    for ffi in crossed:
        named = [(k, b) for k, b in route.boundaries.items() if b.kind.casefold() == ffi.casefold()]
        if not named:
            why = "its runtime" if ffi == RUNTIME_FFI.get(route.runtime) else "`ffi`"
            out.append(
                check(
                    f"boundary:{ffi}",
                    "hold",
                    f"the runtime crosses the {ffi} boundary ({why} says so) and [routes.{name}.boundaries] names no "
                    f'{ffi} boundary: add one with kind = "{ffi}" and its owner',
                    "TRT609",
                    ("routes", name),
                    {"ffi": ffi},
                    False,
                )
            )
            continue
        key, b = named[0]
        if not (b.owner or "").strip():
            out.append(
                check(
                    f"boundary:{ffi}",
                    "hold",
                    f"{ffi} boundary '{key}' has no owner: set owner in [routes.{name}.boundaries.{key}]",
                    "TRT609",
                    ("routes", name, "boundaries", key),
                    {"ffi": ffi},
                )
            )
            continue
        out.append(
            check(
                f"boundary:{ffi}",
                "pass",
                f"{ffi} boundary '{key}' is owned by {b.owner}",
                "TRT609",
                ("routes", name, "boundaries", key),
                {"ffi": ffi, "owner": b.owner},
                False,
            )
        )
    return out


def checkpoint_precision(ctx: GateContext) -> str | None:
    """The checkpoint's floating precision, from its safetensors headers (None: no weights read)."""
    from trtls.checkpoint.sniff import read_safetensors_header

    g1 = ctx.gate1
    if g1 is None or g1.layout is None or g1.layout.files_dir is None:
        return None
    kinds = set()
    for rel in g1.files:
        if rel.endswith(".safetensors"):
            _, tensors, _ = read_safetensors_header(g1.layout.files_dir / rel)
            kinds |= {DTYPE_PRECISION[t.dtype] for t in tensors.values() if t.dtype in DTYPE_PRECISION}
    floats = [k for k in LOSS_ORDER if k in kinds and k != "int8"] or [k for k in LOSS_ORDER if k in kinds]
    return floats[-1] if floats else None


def deployed_precision(ctx: GateContext) -> str | None:
    """The deployed artifact's precision: the engine recipe's conversion or legacy flags, else the bundle's ONNX."""
    route = ctx.route
    eng = ctx.loaded.recipe.engines.get(route.engine) if route.engine and ctx.loaded.recipe else None
    if eng is not None:
        if eng.precision.convert:
            return str(eng.precision.convert)
        flags = [f for f in LOSS_ORDER if f in (eng.precision.legacy_flags or [])]
        if flags:
            return flags[-1]
    try:
        from trtls.bundle import read_bundle

        recorded = str(read_bundle(ctx.resolve(route.bundle)).header.get("precision") or "")
    except Exception:
        return None
    kinds = [k for k in LOSS_ORDER if k in recorded.split("+")]
    return kinds[-1] if kinds else None


def precision_checks(ctx: GateContext) -> list[GateCheck]:
    route, name = ctx.route, ctx.route_name
    ckpt, deployed = checkpoint_precision(ctx), deployed_precision(ctx)
    if ckpt is None or deployed is None or LOSS_ORDER.index(deployed) <= LOSS_ORDER.index(ckpt):
        return []
    evidence = {"checkpoint_precision": ckpt, "deployed_precision": deployed, "preset": TOLERANCE_PRESETS[deployed]}
    check = partial(gate_check, 4)
    if route.tolerance_precision == deployed:
        message = f"the deployed artifact is {deployed}, the checkpoint {ckpt}: tolerances are set for {deployed}"
        return [check("parity.precision", "pass", message, "TRT813", ("routes", name, "tolerance_precision"), evidence)]
    p = TOLERANCE_PRESETS[deployed]
    message = (
        f"the deployed artifact is {deployed}, the checkpoint {ckpt}: the tolerances are not set for {deployed} "
        f"(tolerance_precision = {route.tolerance_precision or 'unset'}); review them and set "
        f'tolerance_precision = "{deployed}" (preset: atol {p["atol"]}, rtol {p["rtol"]}; docs/gates.md)'
    )
    return [check("parity.precision", "hold", message, "TRT813", ("routes", name), evidence, False)]


def _sm(value: str) -> str | None:
    v = value.strip().upper().replace(".", "")
    if v.startswith("SM") and v[2:].isdigit():
        return v
    return f"SM{v}" if v.isdigit() else None


def portability_checks(ctx: GateContext) -> list[GateCheck]:
    """`release.engine_portability` (gates.engine_portability: what TensorRT-RTX said of the linked build's engine),
    then each target: outside what the engine loads on (core.loads_on) holds as "engine portability"; inside, it
    passes only where the deployed artifact executed in this run."""
    from trtls.core.loads_on import compute_capability
    from trtls.gates.engine_portability import REASON, built_loads_on, linked_build, validity_check

    route, name = ctx.route, ctx.route_name
    linked = linked_build(ctx)
    out = [c for c in (validity_check(ctx, linked),) if c is not None]
    if not route.targets:
        return out
    env = ctx.gate2.environment if ctx.gate2 else {}
    executed = any(c.name == "parity.deployed_artifact" and c.status == "pass" for c in ctx.checks)
    here = {str(env.get("gpu_name") or "").casefold(), _sm(str(env.get("compute_capability") or "")) or ""} - {""}
    if route.deploys == "onnx":
        import platform

        here = {platform.machine().casefold()}
    summary = linked[1] if linked else None
    built = built_loads_on(ctx, summary)
    validity = (summary.engineValidity or {}) if summary else {}
    checked_on = str((summary.target.device if summary and summary.target else None) or "").casefold()
    check = partial(gate_check, 5)
    for i, target in enumerate(route.targets):
        sm, cc = _sm(target), compute_capability(target)
        covered = built.covers(cc) if built is not None and cc else None
        if checked_on and target.casefold() == checked_on and validity.get("status") == "invalid":
            covered = False  # TensorRT-RTX said so on that very GPU
        status: CheckStatus = "pass"
        if covered is False and built is not None:
            status, why = "hold", f"{REASON}: the engine will not load on it (it loads on {built.text()})"
        elif executed and (target.casefold() in here or (sm is not None and sm in here)):
            why = "the deployed artifact was built for it and executed on it in this run"
        else:
            status = "hold"
            where = ", ".join(sorted(here)) or "no GPU"
            why = f"not validated: the deployed artifact was not executed on it (this run: {where}" + (
                ", not executed)" if not executed else ")"
            )
        out.append(
            check(
                f"release.portability:{target}",
                status,
                f"target {target}: {why}",
                "TRT911",
                ("routes", name, "targets", i),
                {
                    "target": target,
                    "compute_capability": cc,
                    "executed_here": executed,
                    "here": sorted(here),
                    "loads_on": built.record() if built is not None else None,
                },
            )
        )
    return out
