"""TRT912 `release.session`: gate 5 measured an ONNX Runtime session with the settings the route gives
(`runtime_options`: threads, inter_threads, graph_optimization, provider); the deployment runs with what the bundle
records (`trtls route build` writes the route's settings into its provenance as `runtime_session`). When the two
differ, the figures describe a runtime that will not be deployed: the route holds, naming each setting."""

from __future__ import annotations

from functools import partial
from typing import Any

from trtls.core.findings import TomlPath
from trtls.core.gate_result import GateCheck, gate_check
from trtls.runtimes import RuntimeSpec

_check = partial(gate_check, 5)


def recorded_session(header: dict[str, Any] | None) -> Any:
    """The `runtime_session` a bundle header's trtls provenance records (None when it records none)."""
    record = (header or {}).get("trtls")
    provenance = record.get("provenance") if isinstance(record, dict) else None
    return provenance.get("runtime_session") if isinstance(provenance, dict) else None


def check_session(spec: RuntimeSpec, header: dict[str, Any] | None, path: TomlPath) -> GateCheck | None:
    """None when the runtime under test has no session settings (not ONNX Runtime)."""
    measured = spec.session_settings()
    if measured is None:
        return None
    recorded = recorded_session(header)
    ev = {"measured": measured, "recorded": recorded}
    if not isinstance(recorded, dict):
        return _check(
            "release.session",
            "hold",
            "the bundle records no ONNX Runtime session settings, so the deployment's threads, graph optimisation "
            "and provider are unknown and may not be the measured ones: rebuild it with `trtls route build`",
            "TRT912",
            path,
            ev,
        )
    differ = [
        f"{k} {recorded.get(k)!r} in the bundle, {v!r} measured" for k, v in measured.items() if recorded.get(k) != v
    ]
    if differ:
        return _check(
            "release.session",
            "hold",
            "the bundle deploys another ONNX Runtime session than gate 5 measured: "
            + "; ".join(differ)
            + " (rebuild the bundle with the route's runtime_options, or set them back)",
            "TRT912",
            path,
            ev,
        )
    said = ", ".join(f"{k} {v}" for k, v in measured.items())
    return _check(
        "release.session", "pass", f"measured with the session the bundle records ({said})", "TRT912", path, ev
    )
