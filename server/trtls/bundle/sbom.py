"""A CycloneDX 1.5 SBOM for a promoted bundle (gate 3: "attach SBOM-style records").

What a reviewer needs to recreate or audit the bundle, each with its sha256:

    metadata.component   the .bundle itself
    components           checkpoint (machine-learning-model, version = pinned revision) with its files
                         nested inside; the ONNX export; the engine; the builder (tensorrt_rtx / tensorrt);
                         trtls itself
    dependencies         bundle → engine, checkpoint; engine → onnx, builder; onnx → checkpoint

No timestamp or serial number is invented inside `make_sbom` unless the caller leaves them out, so a
caller that passes both gets the same document for the same inputs.
"""

from __future__ import annotations

import json
import os
import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from trtls.core.paths import BUNDLE_SBOM_SUFFIX, real
from trtls.fs import Kind, atomic_write_text

SPEC_VERSION = "1.5"
SBOM_SUFFIX = BUNDLE_SBOM_SUFFIX  # the SBOM sits beside its bundle: <bundle>.cdx.json
_HEX64 = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class FileDigest:
    name: str  # as the user knows it: "model.safetensors", "model.onnx", "engine.plan"
    sha256: str  # lowercase hex
    size: int | None = None

    def __post_init__(self) -> None:
        if not _HEX64.fullmatch(self.sha256):
            raise ValueError(f"{self.name}: sha256 must be 64 lowercase hex digits, got {self.sha256!r}")


def _file_component(ref: str, f: FileDigest) -> dict[str, Any]:
    component: dict[str, Any] = {
        "type": "file",
        "bom-ref": ref,
        "name": f.name,
        "hashes": [{"alg": "SHA-256", "content": f.sha256}],
    }
    if f.size is not None:
        component["properties"] = [{"name": "trtls:size_bytes", "value": str(f.size)}]
    return component


def _timestamp(when: datetime | None) -> str:
    when = when or datetime.now(UTC)
    if when.tzinfo is None:
        raise ValueError("timestamp must be timezone-aware")
    return when.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def make_sbom(
    *,
    bundle: FileDigest,
    checkpoint_id: str,
    checkpoint_revision: str,
    checkpoint_files: Sequence[FileDigest],
    builder_name: str,
    builder_version: str,
    trtls_version: str,
    onnx: FileDigest | None = None,
    engine: FileDigest | None = None,
    checkpoint_license: str | None = None,
    checkpoint_url: str | None = None,
    properties: Mapping[str, str] | None = None,
    timestamp: datetime | None = None,
    serial_number: uuid.UUID | None = None,
    plugins: Sequence[FileDigest] = (),
) -> dict[str, Any]:
    """The SBOM as a dict (CycloneDX 1.5 JSON). `properties` become `trtls:<key>` metadata properties
    (e.g. build_config_hash), for the facts CycloneDX has no field for."""
    checkpoint: dict[str, Any] = {
        "type": "machine-learning-model",
        "bom-ref": "checkpoint",
        "name": checkpoint_id,
        "version": checkpoint_revision,
        "components": [_file_component(f"checkpoint-file-{i}", f) for i, f in enumerate(checkpoint_files)],
    }
    if checkpoint_license:
        # A name, not an SPDX id: model cards carry licenses ("llama3.1", "other") SPDX does not list.
        checkpoint["licenses"] = [{"license": {"name": checkpoint_license}}]
    if checkpoint_url:
        checkpoint["externalReferences"] = [{"type": "distribution", "url": checkpoint_url}]

    trtls_tool = {"type": "application", "bom-ref": "trtls", "name": "trtls", "version": trtls_version}
    components: list[dict[str, Any]] = [checkpoint]
    bundle_deps = ["checkpoint"]
    engine_deps = ["builder"]
    if onnx is not None:
        components.append(_file_component("onnx", onnx))
        engine_deps.insert(0, "onnx")
    if engine is not None:
        components.append(_file_component("engine", engine))
        bundle_deps.insert(0, "engine")
    components += [
        {"type": "application", "bom-ref": "builder", "name": builder_name, "version": builder_version},
        trtls_tool,
    ]
    for i, lib in enumerate(plugins):  # plugin libraries the engine loads (custom kernels): part of what ships
        components.append({**_file_component(f"plugin-{i}", lib), "type": "library"})
        engine_deps.append(f"plugin-{i}")
    dependencies = [{"ref": "bundle", "dependsOn": bundle_deps}]
    if engine is not None:
        dependencies.append({"ref": "engine", "dependsOn": engine_deps})
    if onnx is not None:
        dependencies.append({"ref": "onnx", "dependsOn": ["checkpoint"]})

    metadata: dict[str, Any] = {
        "timestamp": _timestamp(timestamp),
        "tools": {"components": [{"type": "application", "name": "trtls", "version": trtls_version}]},
        "component": _file_component("bundle", bundle),
    }
    if properties:
        metadata["properties"] = [{"name": f"trtls:{k}", "value": str(v)} for k, v in properties.items()]
    return {
        "bomFormat": "CycloneDX",
        "specVersion": SPEC_VERSION,
        "serialNumber": (serial_number or uuid.uuid4()).urn,
        "version": 1,
        "metadata": metadata,
        "components": components,
        "dependencies": dependencies,
    }


def write_sbom(
    path: str | os.PathLike[str], sbom: Mapping[str, Any], *, within: str | os.PathLike[str] | None = None
) -> None:
    """Write the SBOM atomically (by convention `<bundle>.cdx.json` beside the bundle), through the door: inside
    `within` (a route build passes its bundle's judged folder; None: the SBOM's own real folder)."""
    root = within if within is not None else real(Path(path).parent)
    text = json.dumps(sbom, indent=2, ensure_ascii=False) + "\n"
    atomic_write_text(path, text, kind=Kind.route_artefact, within=root)


def sbom_path(bundle: str | os.PathLike[str]) -> Path:
    p = Path(bundle)
    return p.with_name(p.name + SBOM_SUFFIX)
