"""`build_target`: what the engine is built for, as the worker writes it in `build_started.target`. Its own module,
standard library only: the worker imports it before TensorRT and needs nothing else of core.evidence; every caller
imports it from here."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # types only: the worker imports this module, and never pydantic (tests/test_layers.py)
    from trtls.core.build_records import BuildTargetRecord


def build_target(environment: dict[str, Any], effective: dict[str, Any]) -> BuildTargetRecord:
    """What the engine is built for: part of the buildConfigHash, so durations measured for one target are
    never shown as the usual duration on another. TensorRT-RTX builds for the listed compute capabilities;
    full TensorRT builds for the device it runs on (and, with a hardware-compatibility level, for a family).
    A plain dict (the worker's `build_started.target`), validated at the supervisor's edge as
    `core.build_records.BuildTarget`."""
    return {
        "computeCapabilities": effective.get("compute_capabilities") or "builder default",
        "hardwareCompatibilityLevel": effective.get("hardware_compatibility_level") or "builder default",
        "device": environment.get("device_name"),
        "deviceComputeCapability": environment.get("compute_capability"),
    }
