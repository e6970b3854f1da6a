"""Gate 3 on a bundle trtls did not write: provenance from the build receipt beside it (`trtls.bundle.receipt`)."""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

from trtls.bundle.receipt import RECEIPT_SUFFIX, read_receipt, receipt_checksum, receipt_path
from trtls.core.gate_result import GateCheck, gate_check

GATE = 3
_check = partial(gate_check, GATE)


def check_receipt(
    bundle: Path, file_sha256: str | None, where: tuple[str, ...], current_commit: str | None = None
) -> GateCheck:
    """TRT713 (no usable receipt, or one built from another revision than the route's checkpoint now resolves: hold) /
    TRT714 (the receipt's checksum is not this file's: reject)."""
    path = receipt_path(bundle)
    receipt, problems = read_receipt(bundle)
    ev: dict[str, Any] = {"receipt": str(path)}
    if receipt is None and not problems:
        return _check(
            "bundle.receipt",
            "hold",
            f"a bundle trtls did not write records no checkpoint revision or checksum of its own: put its build "
            f"receipt beside it as {path.name} (model id and immutable revision, bundle sha256, complete command and "
            f"config, TensorRT/CUDA cohort and SM, family, runtime strategy, precision, quantization, topology; "
            f"docs/gates.md, '{RECEIPT_SUFFIX}')",
            "TRT713",
            where,
            ev,
        )
    if receipt is None or problems:
        return _check(
            "bundle.receipt", "hold", f"build receipt {path.name}: " + "; ".join(problems), "TRT713", where, ev
        )
    recorded = receipt_checksum(receipt)
    ev.update(recorded_sha256=recorded, file_sha256=file_sha256)
    if file_sha256 is None or recorded != file_sha256:
        return _check(
            "bundle.receipt.checksum",
            "reject",
            f"build receipt {path.name} records bundle sha256 {recorded}, the file is {file_sha256}: the receipt "
            f"describes another bundle",
            "TRT714",
            where,
            ev,
        )
    ev.update({k: receipt.get(k) for k in ("model_id", "revision", "family", "runtime_strategy", "precision")})
    ev["current_commit"] = current_commit
    if current_commit is not None and receipt["revision"] != current_commit:
        return _check(
            "bundle.receipt",
            "hold",
            f"build receipt {path.name}: built from revision {receipt['revision']}, the route's checkpoint now "
            f"resolves {current_commit}: rebuild the bundle from this revision",
            "TRT713",
            where,
            ev,
        )
    return _check(
        "bundle.receipt",
        "pass",
        f"build receipt {path.name}: {receipt['model_id']}@{str(receipt['revision'])[:12]}, checksum matches",
        "TRT713",
        where,
        ev,
    )
