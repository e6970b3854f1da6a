"""The ONNX Runtime session a route deploys with, in one place: its settings as the route's `runtime_options` give
them (intra/inter-op threads, graph optimisation level, provider) and their defaults. `trtls route build` records
this in the bundle's provenance (`runtime_session`); gates 4 and 5 create every session with it
(`runtimes.RuntimeSpec`) and gate 5 holds when the bundle records another (TRT912)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# runtime_options key → (provenance/evidence name, default)
SESSION_OPTIONS: dict[str, tuple[str, Any]] = {
    "threads": ("intra_op_threads", 1),
    "inter_threads": ("inter_op_threads", 1),
    "graph_optimization": ("graph_optimization", "all"),
    "provider": ("provider", "CPUExecutionProvider"),
}
SESSION_RUNTIMES = ("onnxruntime",)


def runtime_session(runtime: str, runtime_options: Mapping[str, Any]) -> dict[str, Any] | None:
    """The session settings of a route whose runtime is ONNX Runtime (None for any other runtime)."""
    if runtime not in SESSION_RUNTIMES:
        return None
    return {name: runtime_options.get(key, default) for key, (name, default) in SESSION_OPTIONS.items()}
