"""Will it load there, before the build: the compute capabilities an engine will load on, from the builder module, its
`compute_capabilities` setting (or the builder's default) and its hardware-compatibility level. One rule, here; the
faces render it: the engine's hover and lens (lsp), `trtls check --builder` (TRT153), a route's `targets` at check
time (TRT152) and at gate 5 (TRT911, gates.runbook_holds), and the route summary's `runtime_target_loads_on`.

What the rule rests on (docs/build-config.md, "Will the engine load on this GPU"):

* TensorRT-RTX builds for its `compute_capabilities` and loads on exactly those. Its default, in its own words on the
  lent H200 (tests/data/engine_validity/h200.json): "Supported compute capabilities: 8.0 8.6 8.9 12.0 12.1 >12.0";
  `["SM89"]` alone: "8.9"; `["SM80", "SM120"]`: "8.0 12.0". It does not apply `hardware_compatibility_level` (the
  worker reports it not applied; with `ampere_plus` TensorRT-RTX said the default's list). `CURRENT`: the GPU the build
  runs on.
* Full TensorRT builds for the GPU it runs on (`compute_capabilities` is not applied): the engine loads on that GPU's
  compute capability, unless `hardware_compatibility_level = "ampere_plus"` (Ampere, 8.0, and later).

Tokens are TensorRT's own: "8.9", and ">12.0" for any later compute capability.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

RTX = "tensorrt_rtx"
TRT = "tensorrt"
# TensorRT-RTX 1.7's default targets, as it named them on the H200 (tests/data/engine_validity/h200.json)
RTX_DEFAULT = ("8.0", "8.6", "8.9", "12.0", "12.1", ">12.0")
AMPERE_PLUS = ("8.0", ">8.0")  # full TensorRT's hardware_compatibility_level = "ampere_plus": Ampere and later
BUILD_GPU = "the GPU it is built on"
DEFAULT = "builder default"  # what the build record says of a setting left unset (core.build_target.build_target)
_SM = re.compile(r"^(?:SM_?)?(\d{2,3})$", re.I)
_DOTTED = re.compile(r"^(\d{1,2})\.(\d)$")


def compute_capability(value: str) -> str | None:
    """A GPU target as a dotted compute capability: "SM89" / "sm_89" / "89" / "8.9" → "8.9", "SM120" → "12.0";
    None when it is not one (a GPU's name, "CURRENT")."""
    v = value.strip()
    dotted = _DOTTED.match(v)
    if dotted:
        return f"{int(dotted.group(1))}.{dotted.group(2)}"
    sm = _SM.match(v)
    return f"{int(sm.group(1)[:-1])}.{sm.group(1)[-1]}" if sm else None


def _key(cc: str) -> tuple[int, int]:
    major, _, minor = cc.partition(".")
    return int(major), int(minor or 0)


@dataclass(frozen=True)
class LoadsOn:
    """The compute capabilities an engine will load on (`capabilities`, TensorRT's tokens), and why (`basis`).
    `capabilities` is empty when they are not known before the build: the GPU it is built on (`build_gpu`), or a
    builder module not known yet (`module` None: `builder_module = "auto"` and nothing probed)."""

    module: str | None
    capabilities: tuple[str, ...]
    basis: str
    build_gpu: bool = False

    def covers(self, cc: str) -> bool | None:
        """Whether it loads on compute capability `cc` ("9.0"); None when that is not known before the build."""
        if not self.capabilities:
            return None
        key = _key(cc)
        for token in self.capabilities:
            if token.startswith(">") and key > _key(token[1:]):
                return True
            if not token.startswith(">") and key == _key(token):
                return True
        return False

    def text(self) -> str:
        """The words every face shows: "8.0 8.6 8.9 12.0 12.1 >12.0 (builder default)"."""
        if self.capabilities:
            return f"{' '.join(self.capabilities)} ({self.basis})"
        return self.basis

    def record(self) -> dict[str, object]:
        """As records carry it (the route summary's `runtime_target_loads_on`)."""
        return {"module": self.module, "computeCapabilities": list(self.capabilities), "basis": self.basis}

    @classmethod
    def from_record(cls, record: object) -> LoadsOn | None:
        """`record()` read back (a face rendering a summary); None for anything else."""
        if not isinstance(record, dict) or not isinstance(record.get("basis"), str):
            return None
        listed = record.get("computeCapabilities")
        module = record.get("module")
        return cls(
            module if isinstance(module, str) else None,
            tuple(str(c) for c in listed) if isinstance(listed, list) else (),
            record["basis"],
        )


def loads_on(
    module: str | None,
    compute_capabilities: list[str] | str | None = None,
    hardware_level: str | None = None,
    build_gpu_cc: str | None = None,
) -> LoadsOn:
    """The rule. `module`: "tensorrt_rtx", "tensorrt", or None/"auto" when not known; `compute_capabilities`: the
    recipe's list (["SM89"]) or a build record's (its read-back names, or "builder default"); `hardware_level`: the
    recipe's or the record's level; `build_gpu_cc`: the compute capability of the GPU the build runs (ran) on, when
    known ("9.0")."""
    ccs = [str(c).upper() for c in compute_capabilities] if isinstance(compute_capabilities, list) else []
    level = str(hardware_level or "").lower()
    level = "" if level in ("", DEFAULT, "none") else level
    if module == RTX:
        if ccs == ["CURRENT"]:
            return _on_build_gpu(module, build_gpu_cc, 'compute_capabilities = ["CURRENT"]')
        if ccs:
            listed = tuple(dict.fromkeys(c for c in (compute_capability(x) for x in ccs) if c))
            return LoadsOn(module, listed, "compute_capabilities = [" + ", ".join(f'"{c}"' for c in ccs) + "]")
        return LoadsOn(module, RTX_DEFAULT, DEFAULT + " (TensorRT-RTX)")
    if module == TRT:
        if level == "ampere_plus":
            return LoadsOn(module, AMPERE_PLUS, 'hardware_compatibility_level = "ampere_plus"')
        why = f'hardware_compatibility_level = "{level}"' if level else "full TensorRT"
        return _on_build_gpu(module, build_gpu_cc, why)
    return LoadsOn(
        None,
        (),
        'not known before the build: builder_module = "auto" loads full TensorRT if installed (the GPU it is built '
        f"on), else TensorRT-RTX ({' '.join(RTX_DEFAULT)} by default)",
    )


def runtime_target_text(runtime_target: object, record: object) -> str:
    """The route summary's runtime target as the faces print it (`trtls gates`, the route report):
    "tensorrt_rtx (loads on 8.0 8.6 8.9 12.0 12.1 >12.0 (builder default (TensorRT-RTX)))"."""
    built = LoadsOn.from_record(record)
    return f"{runtime_target}" + (f" (loads on {built.text()})" if built is not None else "")


def _on_build_gpu(module: str, build_gpu_cc: str | None, why: str) -> LoadsOn:
    if build_gpu_cc:
        return LoadsOn(module, (build_gpu_cc,), f"{why}: {BUILD_GPU}", True)
    return LoadsOn(module, (), f"{BUILD_GPU} ({why})", True)


def engine_loads_on(eng: object, module: str | None = None, build_gpu_cc: str | None = None) -> LoadsOn:
    """An `[engines.X]` table's answer: its `builder_module` when it names one, else `module` (the probed one)."""
    preference = getattr(eng, "builder_module", "auto")
    builder = getattr(eng, "builder", None)
    return loads_on(
        preference if preference != "auto" else module,
        getattr(builder, "compute_capabilities", None),
        getattr(builder, "hardware_compatibility_level", None),
        build_gpu_cc,
    )


def rtx_buildable() -> dict[str, str]:
    """Compute capability → the `compute_capabilities` name TensorRT-RTX builds it by ("8.9" → "SM89")."""
    from typing import get_args

    from trtls.core.build_config import ComputeCapability

    names = [n for n in get_args(ComputeCapability) if n != "CURRENT"]
    return {str(compute_capability(n)): n for n in names}


def target_findings(route_name: str, targets: list[str], engine_name: str, eng: Any) -> list[Any]:
    """TRT152, at check time: each `targets` entry of an engine route that names a compute capability (`SM89`,
    `8.9`) the engine will not load on, located on that entry, with what it loads on and how to get there. Said only
    where the rule knows (a named builder module, a known GPU): `builder_module = "auto"` or a full TensorRT engine
    built for the GPU it is built on is judged at gate 5 instead (TRT911)."""
    from trtls.core.findings import Finding, Origin, Severity

    built = engine_loads_on(eng)
    out = []
    for i, target in enumerate(targets):
        cc = compute_capability(target)
        if cc is None or built.covers(cc) is not False:
            continue
        sm = rtx_buildable().get(cc)
        if built.module == RTX and sm:
            fix = f'add "{sm}" to engines.{engine_name}.builder.compute_capabilities'
        elif built.module == RTX:
            fix = f"TensorRT-RTX cannot build for compute capability {cc}: build it with full TensorRT on that GPU"
        else:
            fix = f"build it on a GPU of compute capability {cc}"
        message = (
            f"target {target}: engine portability: engine {engine_name} will not load on compute capability {cc} "
            f"(it loads on {built.text()}); {fix}"
        )
        data = {"target": target, "computeCapability": cc, "loadsOn": built.record()}
        where = ("routes", route_name, "targets", i)
        out.append(Finding("TRT152", Severity.warning, message, where, Origin.recipe, True, data))
    return out


def loads_on_findings(engines: dict[str, Any], module: str) -> list[Any]:
    """TRT153 (`trtls check --builder`, information, on each engine's table): where the engine will load, with the
    probed module (`module`: "tensorrt_rtx 1.7.1.116") standing in for `builder_module = "auto"`."""
    from trtls.core.findings import Finding, Origin, Severity

    name = module.split()[0] if module else None
    out = []
    for engine, eng in engines.items():
        built = engine_loads_on(eng, name)
        message = f"engine {engine} will load on compute capabilities {built.text()}"
        if built.build_gpu and not built.capabilities:
            message = f"engine {engine} will load on {built.text()}"
        data = {"loadsOn": built.record(), "module": module}
        out.append(Finding("TRT153", Severity.information, message, ("engines", engine), Origin.recipe, False, data))
    return out
