"""What a route build leaves behind: its result record, and the previous bundle kept for rollback (both the
engine route and the ONNX route write them)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trtls.bundle import sidecar_path, verify_bundle
from trtls.bundle.sbom import sbom_path
from trtls.core.atomic import atomic_write_bytes


@dataclass
class RouteBuildResult:
    route: str
    outcome: str  # built (bundle written) | cancelled | failed | forced | killed | error
    message: str
    bundle: str
    bundle_digest: str | None = None  # "sha256:…" of the bundle written
    sbom: str | None = None
    onnx: str | None = None
    build_id: str | None = None
    build_summary_path: str | None = None
    cancel_source: str | None = None
    previous_bundle: str | None = None  # where the replaced bundle was kept
    previous_kept: bool = False
    notes: list[str] = field(default_factory=list)
    provenance: dict[str, Any] | None = None
    duration_s: float | None = None  # the whole route build (export + engine build + bundle)

    @property
    def ok(self) -> bool:
        return self.outcome == "built"


def stopped_before_bundle(route: str, bundle: str, source: str, step: str) -> RouteBuildResult:
    """A route build stopped (Ctrl-C, SIGTERM, the API) during a step before the engine build or the bundle write:
    nothing was written, the bundle at `bundle` is untouched."""
    message = f"stopped by {source} during {step}; the bundle was not touched"
    return RouteBuildResult(route, "cancelled", message, bundle, cancel_source=source)


def keep_previous(bundle: Path, previous: Path, notes: list[str]) -> bool:
    """Copy the bundle at `bundle` (and its sidecar, SBOM) to `previous`, atomically, if it verifies."""
    problems = verify_bundle(bundle)
    if problems:
        notes.append(f"the existing bundle fails verification ({problems[0]}); not kept as the previous bundle")
        return False
    previous.parent.mkdir(parents=True, exist_ok=True)
    side, prev_side = sidecar_path(bundle), sidecar_path(previous)
    side_bytes = side.read_bytes() if side.is_file() else None
    sbom_bytes = sbom_path(bundle).read_bytes() if sbom_path(bundle).is_file() else None

    def chunks() -> Iterator[bytes]:
        with open(bundle, "rb") as f:
            while part := f.read(1024 * 1024):
                yield part

    atomic_write_bytes(previous, chunks())
    if side_bytes is not None:
        try:
            record = json.loads(side_bytes)
            if isinstance(record, dict):
                record["bundle"] = previous.name
                side_bytes = (json.dumps(record, indent=2, ensure_ascii=False) + "\n").encode()
        except ValueError:
            pass
        atomic_write_bytes(prev_side, side_bytes)
    if sbom_bytes is not None:
        atomic_write_bytes(sbom_path(previous), sbom_bytes)
    if verify_bundle(previous):
        notes.append(f"the copy at {previous} does not verify")
        return False
    return True
