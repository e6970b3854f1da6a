"""What TensorRT Model Connect's header reader would see. It takes the first occurrence of a key anywhere in the
header JSON, so a top-level field that is missing is read from a nested one: a bundle whose header lacks `family`
but carries `provenance.family = "SPOOF"` loads as family SPOOF. `shadowed_fields` finds every such field."""

from __future__ import annotations

from typing import Any

# The top-level fields TRTMC's runtime reads to pick a pipeline (bundle-format.md, pipeline_factory.cpp).
TRTMC_FIELDS = (
    "model_id",
    "model_type",
    "family",
    "trt_version",
    "trt_abi",
    "gpu_name",
    "precision",
    "quantization",
    "runtime_strategy",
    "engine_backend",
    "topology",
)


def _first_nested(value: Any, key: str, path: str) -> tuple[str, Any] | None:
    if isinstance(value, dict):
        for k, v in value.items():
            here = f"{path}.{k}" if path else str(k)
            if k == key and path:
                return here, v
            found = _first_nested(v, key, here)
            if found is not None:
                return found
    elif isinstance(value, list):
        for i, v in enumerate(value):
            found = _first_nested(v, key, f"{path}[{i}]")
            if found is not None:
                return found
    return None


def shadowed_fields(header: dict[str, Any]) -> list[dict[str, Any]]:
    """Each TRTMC field missing at the top level but present nested: {field, at, value} (first occurrence)."""
    out = []
    for key in TRTMC_FIELDS:
        if key in header:
            continue
        found = _first_nested(header, key, "")
        if found is not None:
            out.append({"field": key, "at": found[0], "value": found[1]})
    return out
