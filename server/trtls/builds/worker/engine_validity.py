"""Will the engine load here: TensorRT-RTX's `IRuntime.get_engine_validity(plan)`, asked after a build on a machine
with a CUDA GPU, with what TensorRT logged while answering, and its words parsed into compute capabilities.

Why a probe first: on a machine with no GPU the call logs a fatal "CUDA driver version is insufficient" (seen with
TensorRT-RTX 1.7), so without a device the answer is `not_checked` and TensorRT is never asked. Why a logger of our
own: the reason is only in the INFO lines it logs (the worker's relay keeps warnings and errors): on the lent H200 it
returns `(EngineValidity.INVALID, 2)` and logs "The engine cannot run on this GPU, which has compute capability 9.0.
Supported compute capabilities: 8.0 8.6 8.9 12.0 12.1 >12.0. TensorRT-RTX does not support this compute capability,
so the engine cannot be rebuilt for it." (recorded in tests/data/engine_validity/h200.json).

`python -m trtls.builds.worker.engine_validity PLAN` asks the same of an engine file and prints the record as JSON
(exit 0
valid or suboptimal, 1 invalid, 2 not checked or unreadable). TensorRT comes in through `adapter`, as in the worker.
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any

NO_GPU = "no CUDA GPU: the engine's validity on a device cannot be asked"
# EngineInvalidityDiagnostics bits (TensorRT-RTX 1.7 bindings): what a diagnostics number means
DIAGNOSTICS = {
    1: "VERSION_MISMATCH",
    2: "UNSUPPORTED_CC",
    4: "OLD_CUDA_DRIVER",
    8: "OLD_CUDA_RUNTIME",
    16: "INSUFFICIENT_GPU_MEMORY",
    32: "MALFORMED_ENGINE",
    64: "CUDA_ERROR",
}
_GPU_CC = re.compile(r"this GPU, which has compute capability (?P<cc>\d+\.\d+)")
_SUPPORTED = re.compile(r"Supported compute capabilities:(?P<list>(?:\s+>?\d+(?:\.\d+)?)+)")


def parse_validity_message(text: str) -> dict[str, Any] | None:
    """TensorRT-RTX's sentence about a GPU the engine cannot run on → {gpu_cc, supported, rebuildable}; None when the
    text is not that sentence. `supported` keeps TensorRT's own tokens (">12.0": any later one)."""
    gpu = _GPU_CC.search(text)
    listed = _SUPPORTED.search(text)
    if gpu is None and listed is None:
        return None
    return {
        "gpu_cc": gpu.group("cc") if gpu else None,
        "supported": listed.group("list").split() if listed else [],
        # "TensorRT-RTX does not support this compute capability, so the engine cannot be rebuilt for it"
        "rebuildable": False if "cannot be rebuilt" in text else None,
    }


def diagnostics_names(value: int) -> list[str]:
    return [name for bit, name in DIAGNOSTICS.items() if value & bit]


def validity_record(status: str, diagnostics_value: int | None, lines: list[tuple[str, str]]) -> dict[str, Any]:
    """The evidence's `engineValidity`: status, reason (TensorRT's sentence, or the diagnostics' names), every line it
    logged, and the compute capabilities parsed from its words."""
    names = diagnostics_names(diagnostics_value or 0)
    parsed = next((p for p in (parse_validity_message(m) for _, m in lines) if p), None)
    reason = next((m for _, m in lines if parse_validity_message(m)), None)
    if reason is None and names:
        reason = "TensorRT-RTX: " + ", ".join(names)
    if reason is None:  # e.g. "Error reading CUDA GPU properties …" when the driver is too old for the runtime
        reason = next((m for s, m in lines if s in ("INTERNAL_ERROR", "ERROR")), None)
    record: dict[str, Any] = {
        "status": status,
        "reason": reason or ("the engine can run on this GPU" if status == "valid" else None),
        "diagnostics": [{"severity": s, "msg": m} for s, m in lines],
        "diagnosticsCode": diagnostics_value,
        "diagnosticsNames": names,
    }
    if parsed is not None:
        record["gpuComputeCapability"] = parsed["gpu_cc"]
        record["supportedComputeCapabilities"] = parsed["supported"]
        record["rebuildable"] = parsed["rebuildable"]
    return record


def not_checked(reason: str) -> dict[str, Any]:
    return {"status": "not_checked", "reason": reason, "diagnostics": []}


def check(bm: Any, plan: Any, device_name: str | None) -> dict[str, Any]:
    """Ask the loaded module whether `plan` can run on this machine's GPU. Never raises: a module without the call,
    no device, or a failing call is `not_checked` with the reason."""
    if not device_name:
        return not_checked(NO_GPU)
    trt = bm.trt
    if not hasattr(getattr(trt, "Runtime", None), "get_engine_validity"):
        return not_checked(f"{bm.name} has no IRuntime.get_engine_validity (TensorRT-RTX has it)")
    lines: list[tuple[str, str]] = []
    try:
        runtime = trt.Runtime(_collecting_logger(trt, lines))
        validity, diagnostics = runtime.get_engine_validity(plan)
    except Exception as exc:
        return {**not_checked(f"get_engine_validity failed: {type(exc).__name__}: {exc}"), "diagnostics": lines}
    status = str(getattr(validity, "name", validity)).lower()
    if status not in ("valid", "suboptimal", "invalid"):
        status = "not_checked"
    return validity_record(status, int(diagnostics) if diagnostics is not None else None, lines)


def _collecting_logger(trt: Any, lines: list[tuple[str, str]]) -> Any:
    """A logger that keeps every message at INFO and above (a few lines: this call is short, unlike a build)."""

    class Collecting(trt.ILogger):
        def __init__(self) -> None:
            trt.ILogger.__init__(self)

        def log(self, severity: Any, msg: str) -> None:
            name = str(getattr(severity, "name", severity)).removeprefix("k")
            if name != "VERBOSE":
                lines.append((name, msg))

    return Collecting()


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m trtls.builds.worker.engine_validity PLAN", file=sys.stderr)
        return 2
    from trtls.builds.cuda import cuda_driver
    from trtls.builds.worker import adapter
    from trtls.fs import read_bytes

    try:
        plan = read_bytes(argv[0], limit=None, follow=True)
    except OSError as exc:
        print(f"{argv[0]}: cannot read the engine: {exc.strerror or exc}", file=sys.stderr)
        return 2
    driver = cuda_driver()
    try:
        bm = adapter.load_builder_module("auto")
    except Exception as exc:
        record = not_checked(f"no TensorRT module: {exc}")
    else:
        record = check(bm, plan, driver.get("device_name"))
        record["module"] = f"{bm.name} {bm.version}"
    record.update(
        engine=argv[0], device=driver.get("device_name"), deviceComputeCapability=driver.get("compute_capability")
    )
    print(json.dumps(record, indent=2))
    return {"valid": 0, "suboptimal": 0, "invalid": 1}.get(record["status"], 2)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
