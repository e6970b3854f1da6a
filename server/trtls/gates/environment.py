"""Gate 2 — environment and recipe.

The environment is found without importing TensorRT in this process: the builder's version comes from
installed distribution metadata (`importlib.metadata`) and from the `environment` the linked build
recorded; Python from this interpreter; the NVIDIA driver from /proc/driver/nvidia/version; the GPU from
`nvidia-smi` when it exists (or the build evidence). Each pin in `[routes.NAME.environment]` is compared
with every source that knows the value; a mismatch or an unknown value for a pin is a hold naming both.

Checks (docs/codes/gate-environment.md):
  TRT601 a builder is found and matches builder_module         hold
  TRT602 builder version matches builder_version                hold (both values)
  TRT603 Python matches the pin                                 hold
  TRT604 CUDA runtime / driver match their pins                 hold (also when not discoverable)
  TRT605 GPU name / compute capability match their pins         hold (also when no GPU is found)
  TRT606 the engine recipe exists; effective settings recorded  reject when the engine is missing
  TRT607 a successful build of this engine is linked and current: buildConfigHash, timing-cache decision,
         engine file unchanged                                  hold
  TRT608 ONNX Runtime matches the `onnxruntime` pin (a route that deploys the ONNX)   hold

A pin the route's target depends on but the route leaves unset is `not_checked` under the pin's own name
(`builder_version`, `python`, `gpu_name`, …): nothing was compared, so it is never a pass; it holds unless the
recipe waives it (`waive = {"gpu_name" = "why"}`). An engine route depends on builder_module, builder_version,
python, cuda_driver and gpu_name; an ONNX route (no `engine`) on python and onnxruntime.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trtls.core.gate_result import GateCheck
from trtls.core.recipe import settings_digest
from trtls.core.route import RouteModel
from trtls.gates.environment_evidence import (
    brief_evidence,
    effective_settings,
    latest_successful_build,
    route_build_record,
    stale_reasons,
)
from trtls.gates.environment_probe import discover_environment, version_matches


@dataclass
class Gate2Result:
    checks: list[GateCheck]
    environment: dict[str, Any]
    evidence: dict[str, Any] | None  # the linked build summary (selected fields)
    record: dict[str, Any] = field(default_factory=dict)


ENGINE_ROUTE_PINS = ("builder_module", "builder_version", "python", "cuda_driver", "gpu_name")
ONNX_ROUTE_PINS = ("python", "onnxruntime")
PIN_CODES = {
    "builder_module": "TRT601",
    "builder_version": "TRT602",
    "python": "TRT603",
    "cuda_runtime": "TRT604",
    "cuda_driver": "TRT604",
    "gpu_name": "TRT605",
    "compute_capability": "TRT605",
    "onnxruntime": "TRT608",
}


def _cc(value: str | None) -> str | None:
    if value is None:
        return None
    v = str(value).strip().upper()
    if v.startswith("SM"):
        digits = v[2:]
        return f"{digits[:-1]}.{digits[-1]}" if len(digits) >= 2 else digits
    return v


def _pin_verdict(
    add: Any,
    key: str,
    code: str,
    path: tuple[str, ...],
    pin: str,
    missing: str | None,
    mismatch: tuple[str, Any] | None,
    matched: str,
    **missing_evidence: Any,
) -> None:
    """One pin's check, the same rule for every pin: a hold when nothing was found to compare (`missing` follows
    "KEY pinned to PIN"), a hold naming what was found instead (`mismatch`: its text and the evidence's `found`), else
    a pass that says `matched`."""
    if missing is not None:
        add(key, "hold", f"{key} pinned to {pin}{missing}", code, path, **missing_evidence)
    elif mismatch is not None:
        add(key, "hold", f"{key} pinned to {pin}, found {mismatch[0]}", code, path, pinned=pin, found=mismatch[1])
    else:
        add(key, "pass", matched, code, path)


def check_environment(
    loaded: Any, route_name: str, route: RouteModel, environment: dict[str, Any] | None = None
) -> Gate2Result:
    checks: list[GateCheck] = []
    env = dict(environment) if environment is not None else discover_environment()
    pins = route.environment
    base = ("routes", route_name, "environment")

    def add(
        name: str, status: str, message: str, code: str, path: tuple, on_value: bool = True, **evidence: Any
    ) -> None:
        checks.append(GateCheck(2, name, status, message, code, path, on_value, evidence))  # type: ignore[arg-type]

    for key in ENGINE_ROUTE_PINS if route.deploys == "engine" else ONNX_ROUTE_PINS:
        if getattr(pins, key) is None:
            add(
                key,
                "not_checked",
                f"{key} is not pinned: the environment this route is accepted on is not recorded, so nothing was "
                f"compared (pin it in [routes.{route_name}.environment], or waive '{key}' with a reason)",
                PIN_CODES[key],
                ("routes", route_name, "environment"),
                False,
            )
    if route.deploys == "onnx":
        return _check_onnx_route(loaded, route_name, route, env, add, checks)

    assert route.engine is not None  # `deploys` is "engine" exactly when the route names one
    # -- build evidence first: its recorded environment is a source for the builder pins
    linked = latest_successful_build(Path(loaded.base_dir), route.engine)
    ev_env: dict[str, Any] = {}
    evidence: dict[str, Any] | None = None
    if linked is not None:
        path, summary = linked
        ev_env = summary.environment.record() if summary.environment else {}  # the evidence's copy, as recorded
        evidence = {
            "path": str(path),
            "buildId": summary.buildId,
            "buildConfigHash": summary.buildConfigHash,
            "timingCacheMode": summary.timingCacheMode,
            "timingCache": summary.timingCache,
            "tensorrtVersion": summary.tensorrtVersion,
            "builderModule": summary.builderModule,
            "engineArtifact": summary.engineArtifact,
            "environment": ev_env,
        }

    # -- builder
    builders = env.get("builders") or []
    sources: list[tuple[str, str, str | None]] = [
        (f"installed ({b['distribution']})", b["module"], b["version"]) for b in builders
    ]
    if ev_env.get("module"):
        sources.append(
            ("build evidence", str(ev_env.get("module")), str(ev_env.get("version")) if ev_env.get("version") else None)
        )
    if pins.builder_module is not None:
        relevant = [s for s in sources if s[1] == pins.builder_module]
    else:
        relevant = sources
    if pins.builder_module is None:
        pass  # not_checked above: which builder the route needs is not recorded
    elif not sources:
        add(
            "builder",
            "hold",
            "no TensorRT builder found (no tensorrt / tensorrt_rtx distribution installed, no build evidence)",
            "TRT601",
            base + ("builder_module",),
            pins.builder_module is not None,
        )
    elif pins.builder_module is not None and not relevant:
        found = ", ".join(f"{m} {v} ({src})" for src, m, v in sources)
        add(
            "builder",
            "hold",
            f"builder_module pinned to {pins.builder_module}, found {found}",
            "TRT601",
            base + ("builder_module",),
            pinned=pins.builder_module,
            found=found,
        )
    elif pins.builder_module is not None:
        found = ", ".join(f"{m} {v} ({src})" for src, m, v in relevant)
        add(
            "builder",
            "pass",
            f"builder: {found}",
            "TRT601",
            base + ("builder_module",),
            found=[{"source": s, "module": m, "version": v} for s, m, v in relevant],
        )
    if pins.builder_version is not None:
        bad = [(src, m, v) for src, m, v in relevant if v is None or not version_matches(pins.builder_version, v)]
        found = ", ".join(f"{m} {v} ({src})" for src, m, v in bad)
        _pin_verdict(
            add,
            "builder_version",
            "TRT602",
            base + ("builder_version",),
            pins.builder_version,
            None if relevant else "; no matching builder found to compare",
            (found, found) if bad else None,
            f"builder version matches {pins.builder_version}",
            pinned=pins.builder_version,
        )

    # -- python, cuda, gpu: each pin against this machine (and the evidence when it recorded the value)
    def compare(key: str, code: str, pin: str | None, found: list[tuple[str, str | None]], match: Any) -> None:
        if pin is None:
            return
        known = [(src, v) for src, v in found if v]
        bad = [(src, v) for src, v in known if not match(pin, v)]
        _pin_verdict(
            add,
            key,
            code,
            base + (key,),
            pin,
            None if known else " but could not be discovered here",
            (", ".join(f"{v} ({src})" for src, v in bad), [v for _, v in bad]) if bad else None,
            f"{key} {known[0][1]} matches {pin}" if known else "",
            pinned=pin,
        )

    compare("python", "TRT603", pins.python, [("this interpreter", env.get("python"))], version_matches)
    compare(
        "cuda_runtime",
        "TRT604",
        pins.cuda_runtime,
        [("installed", env.get("cuda_runtime")), ("build evidence", ev_env.get("cuda_runtime"))],
        version_matches,
    )
    compare(
        "cuda_driver",
        "TRT604",
        pins.cuda_driver,
        [("driver", env.get("cuda_driver")), ("build evidence", ev_env.get("cuda_driver"))],
        version_matches,
    )
    compare(
        "gpu_name",
        "TRT605",
        pins.gpu_name,
        [("nvidia-smi", env.get("gpu_name")), ("build evidence", ev_env.get("device_name"))],
        lambda p, v: p.casefold() == str(v).casefold(),
    )
    compare(
        "compute_capability",
        "TRT605",
        pins.compute_capability,
        [("nvidia-smi", env.get("compute_capability")), ("build evidence", ev_env.get("compute_capability"))],
        lambda p, v: _cc(p) == _cc(v),
    )

    # -- recipe
    record: dict[str, Any] = {}
    recipe = getattr(loaded, "recipe", None)
    if recipe is None or route.engine not in recipe.engines:
        add("recipe", "reject", f"engine '{route.engine}' is not defined", "TRT606", ("routes", route_name, "engine"))
        return Gate2Result(checks, env, evidence, record)
    eff = effective_settings(loaded, route.engine)
    record["effective_settings"] = eff
    record["settings_digest"] = settings_digest(eff)
    add(
        "recipe",
        "pass",
        f"engine '{route.engine}': optimization level {eff['settings'].get('optimization_level')}, builder_module "
        f"{eff['builder_module']}",
        "TRT606",
        ("routes", route_name, "engine"),
        settings_digest=record["settings_digest"],
    )

    # -- build evidence
    epath = ("routes", route_name, "engine")
    if evidence is None:
        add(
            "build_evidence",
            "hold",
            f"no successful build of engine '{route.engine}' in .trtls/runs: run `trtls build --engine {route.engine}`",
            "TRT607",
            epath,
        )
        return Gate2Result(checks, env, evidence, record)
    problems = stale_reasons(loaded, route.engine, summary)
    if problems:
        add(
            "build_evidence",
            "hold",
            f"build {evidence['buildId']} is not current: " + "; ".join(problems),
            "TRT607",
            epath,
            **brief_evidence(evidence),
        )
    else:
        tc = evidence.get("timingCache") or {}
        add(
            "build_evidence",
            "pass",
            f"build {evidence['buildId']}: buildConfigHash {str(evidence['buildConfigHash'])[:12]}…, timing cache "
            f"{evidence.get('timingCacheMode')}" + (f" ({tc.get('reason')})" if tc.get("reason") else ""),
            "TRT607",
            epath,
            **brief_evidence(evidence),
        )
    return Gate2Result(checks, env, evidence, record)


def _check_onnx_route(
    loaded: Any, route_name: str, route: RouteModel, env: dict[str, Any], add: Any, checks: list[GateCheck]
) -> Gate2Result:
    """Gate 2 for a route that deploys the ONNX model (runtime target ONNX Runtime): the runtime pin, and the
    route build that exported the ONNX (its record names the exporter family and the ONNX digest)."""
    from trtls.checkpoint.hashing import sha256_file

    pins = route.environment
    base = ("routes", route_name, "environment")
    if pins.onnxruntime is not None:
        found = env.get("onnxruntime")
        _pin_verdict(
            add,
            "onnxruntime",
            "TRT608",
            base + ("onnxruntime",),
            pins.onnxruntime,
            None if found else ", not installed",
            (found, found) if found and not version_matches(pins.onnxruntime, found) else None,
            f"onnxruntime {found} matches {pins.onnxruntime}",
        )
    compare_python = pins.python
    if compare_python is not None:
        found = env.get("python")
        ok = found is not None and version_matches(compare_python, found)
        add(
            "python",
            "pass" if ok else "hold",
            f"python {found} matches {compare_python}" if ok else f"python pinned to {compare_python}, found {found}",
            "TRT603",
            base + ("python",),
        )
    onnx_rel = route.onnx or ""
    add(
        "recipe",
        "pass",
        f"the route deploys the ONNX model {onnx_rel} itself (runtime target ONNX Runtime); no engine recipe",
        "TRT606",
        ("routes", route_name, "onnx"),
    )
    record_path, rec = route_build_record(loaded, route_name, loaded.resolve(route.bundle))
    onnx_path = loaded.resolve(onnx_rel)
    evidence: dict[str, Any] | None = None
    epath = ("routes", route_name, "onnx")
    if not isinstance(rec, dict) or rec.get("outcome") != "built":
        add(
            "build_evidence",
            "hold",
            f"no successful `trtls route build --route {route_name}` recorded in {record_path}",
            "TRT607",
            epath,
        )
        return Gate2Result(checks, env, None, {})
    prov: dict[str, Any] = rec["provenance"] if isinstance(rec.get("provenance"), dict) else {}
    evidence = {"record": str(record_path), "onnx_sha256": prov.get("onnx_sha256"), "exporter": prov.get("exporter")}
    now = sha256_file(onnx_path)[0] if onnx_path.is_file() else None
    if now is None or now != evidence["onnx_sha256"]:
        add(
            "build_evidence",
            "hold",
            f"the ONNX model {onnx_rel} is {'gone' if now is None else 'not the one the route build exported'}: "
            f"run `trtls route build --route {route_name}` again",
            "TRT607",
            epath,
            **evidence,
        )
    else:
        add(
            "build_evidence",
            "pass",
            f"route build exported {onnx_rel} (sha256 {now[:12]}…)",
            "TRT607",
            epath,
            **evidence,
        )
    return Gate2Result(checks, env, evidence, {})
