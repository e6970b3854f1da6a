"""What a route build leaves behind: its result record, and the previous bundle kept for rollback (both the
engine route and the ONNX route write them)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trtls import fs
from trtls.bundle import sidecar_path, verify_bundle
from trtls.bundle.sbom import sbom_path
from trtls.fs import Kind, parse_json, read_bytes

SIDE_LIMIT = 64 * 1024 * 1024  # a sidecar or an SBOM lists files and digests: never this large


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


def _optional(path: Path) -> bytes | None:
    """A sidecar or SBOM beside a bundle, read bounded and never through a symlink; None when there is none."""
    try:
        return read_bytes(path, limit=SIDE_LIMIT, follow=False)
    except FileNotFoundError:
        return None


def keep_previous(bundle: Path, previous: Path, notes: list[str], *, within: str | os.PathLike[str]) -> bool:
    """Copy the bundle at `bundle` (and its sidecar, SBOM) to `previous`, atomically, if it verifies; every file is
    written inside `within` (the folder the path policy judged for `previous_bundle`)."""
    problems = verify_bundle(bundle)
    if problems:
        notes.append(f"the existing bundle fails verification ({problems[0]}); not kept as the previous bundle")
        return False
    fs.ensure_folder(previous.parent, within=within)
    prev_side = sidecar_path(previous)
    side_bytes = _optional(sidecar_path(bundle))
    sbom_bytes = _optional(sbom_path(bundle))

    def chunks() -> Iterator[bytes]:
        with fs.open_regular(bundle, limit=None, follow=False) as f:
            while part := f.read(1024 * 1024):
                yield part

    fs.atomic_write_bytes(previous, chunks(), kind=Kind.route_artefact, within=within)
    if side_bytes is not None:
        try:
            record = parse_json(side_bytes)
            if isinstance(record, dict):
                record["bundle"] = previous.name
                side_bytes = (json.dumps(record, indent=2, ensure_ascii=False) + "\n").encode()
        except (ValueError, RecursionError):
            pass
        fs.atomic_write_bytes(prev_side, side_bytes, kind=Kind.route_artefact, within=within)
    if sbom_bytes is not None:
        fs.atomic_write_bytes(sbom_path(previous), sbom_bytes, kind=Kind.route_artefact, within=within)
    if verify_bundle(previous):
        notes.append(f"the copy at {previous} does not verify")
        return False
    return True
