"""The build receipt beside a native TensorRT Model Connect bundle: `<bundle>.receipt.json`.

TRTMC records no digest, signature or checkpoint revision in a native bundle; its build guide asks the builder to
retain a receipt instead (model id and immutable revision, bundle name and checksum, the complete build command and
config, the TensorRT/CUDA cohort and SM architecture, family, runtime strategy, precision, quantization, topology).
TRTMC prescribes no file for it, so trtls defines one: a JSON object named `<bundle file name>.receipt.json` in the
bundle's folder, with `RECEIPT_FIELDS`. `read_receipt` reads it (bounded, duplicate keys refused) and says what is
missing or wrong; the bundle checksum is compared with the file's sha256 by the caller, who has it from the one
verification read.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from trtls.bundle.format import BundleError, _clip, _open_regular, _parse_json_object

RECEIPT_SUFFIX = ".receipt.json"
MAX_RECEIPT = 1024 * 1024
_HEX64 = re.compile(r"(sha256:)?[0-9a-f]{64}")
_IMMUTABLE = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")  # a git commit (sha1 or sha256), never a branch or tag

# field → what it must be (the words are the message a missing or wrong field gets)
RECEIPT_FIELDS: dict[str, str] = {
    "model_id": "the Hugging Face model id",
    "revision": "the checkpoint's immutable revision (a 40- or 64-hex commit)",
    "bundle_sha256": "the bundle's sha256",
    "command": "the complete build command (a string or a list of strings)",
    "config": "the build config (an object, or the config file's text)",
    "trt_version": "the TensorRT version",
    "cuda_version": "the CUDA version",
    "sm": "the SM architecture (e.g. sm_89)",
    "family": "the builder family",
    "runtime_strategy": "the native runtime strategy",
    "precision": "the precision",
    "quantization": "the quantization (a string, an object, or null for none)",
    "topology": "the topology (e.g. tp1 or an object)",
}


def receipt_path(bundle: str | os.PathLike[str]) -> Path:
    p = Path(bundle)
    return p.with_name(p.name + RECEIPT_SUFFIX)


def _field_problem(name: str, value: Any) -> str | None:
    if name == "quantization":
        return None if value is None or isinstance(value, (str, dict)) else "must be a string, an object or null"
    if name == "command":
        ok = (isinstance(value, str) and value.strip()) or (
            isinstance(value, list) and value and all(isinstance(v, str) for v in value)
        )
        return None if ok else "must be a non-empty string or list of strings"
    if name in ("config", "topology"):
        return None if (isinstance(value, str) and value.strip()) or isinstance(value, dict) else "must be set"
    if not isinstance(value, str) or not value.strip():
        return "must be a non-empty string"
    if name == "revision" and not _IMMUTABLE.fullmatch(value):
        return f"{_clip(value)} is not an immutable revision (a 40- or 64-hex commit)"
    if name == "bundle_sha256" and not _HEX64.fullmatch(value):
        return f"{_clip(value)} is not a lowercase hex sha256"
    return None


def read_receipt(bundle: str | os.PathLike[str]) -> tuple[dict[str, Any] | None, list[str]]:
    """(receipt, problems): (None, []) when there is no receipt; the receipt with its problems (missing or malformed
    fields, each named) otherwise; (None, [why]) when it cannot be read as a JSON object."""
    path = receipt_path(bundle)
    if not path.exists():
        return None, []
    try:
        with _open_regular(path) as f:
            raw = f.read(MAX_RECEIPT + 1)
    except BundleError as exc:
        return None, [p.message for p in exc.problems]
    except OSError as exc:
        return None, [f"cannot read {path.name}: {exc}"]
    if len(raw) > MAX_RECEIPT:
        return None, [f"{path.name} is larger than {MAX_RECEIPT} bytes"]
    try:
        data = _parse_json_object(raw)
    except ValueError as exc:
        return None, [f"{path.name} is not valid JSON: {exc}"]
    if not isinstance(data, dict):
        return None, [f"{path.name} is not a JSON object"]
    problems = []
    for name, what in RECEIPT_FIELDS.items():
        if name not in data:
            problems.append(f"missing {name} ({what})")
        elif why := _field_problem(name, data[name]):
            problems.append(f"{name} {why}")
    return data, problems


def receipt_checksum(receipt: dict[str, Any]) -> str | None:
    value = receipt.get("bundle_sha256")
    return value.removeprefix("sha256:") if isinstance(value, str) else None
