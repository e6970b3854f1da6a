"""What `trtls bundle inspect` shows: the verification result as JSON, or as terminal-safe text.

Mostly presentation: it reshapes `_verify`'s result and escapes whatever a hostile header could use to forge terminal
output. The one check it adds is TensorRT Model Connect's load (`bundle.trtmc.trtmc_load_checks`), run on every bundle
whose container is sound, ours or foreign: `bundle verify` fails a bundle TRTMC's reader would misread.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict
from pathlib import Path
from typing import Any

from trtls.bundle.format import MAX_HEADER, SIDECAR_SUFFIX, BundleProblem
from trtls.bundle.trtmc import CHECK_TRTMC_LOAD
from trtls.bundle.verify import _verify
from trtls.core.terminal_text import terminal_safe


def inspect_json(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Everything `trtls bundle inspect --json` shows; never raises for bad input (problems say why)."""
    p = Path(path)
    result = _verify(p, MAX_HEADER)
    out: dict[str, Any] = {
        "path": str(p),
        "size": result.file_size,
        "file_sha256": result.file_sha256,
        "ok": not result.problems,
        "problems": [asdict(pr) for pr in result.problems],
        "header": None,
        "sections": [],
        "trtls": None,
        "sidecar": result.sidecar,
    }
    if result.bundle is None:
        return out
    header = dict(result.bundle.header)
    header.pop("sections", None)
    out["trtls"] = header.pop("trtls", None)
    out["header"] = header
    out["payload_start"] = result.bundle.payload_start
    out["sections"] = [
        {
            "name": s.name,
            "offset": s.offset,
            "size": s.size,
            "start": s.start,
            "sha256": result.section_sha256.get(s.name),
        }
        for s in result.bundle.sections.values()
    ]
    if not result.problems:  # a sound container: read it as TensorRT Model Connect's loader would, ours or foreign
        from trtls.bundle.trtmc import trtmc_load_checks

        out["trtmc"] = trtmc_load_checks(p)
        out["problems"] += [asdict(BundleProblem(CHECK_TRTMC_LOAD, m)) for m in out["trtmc"]["problems"]]
        out["ok"] = not out["problems"]
    return out


def inspect_text(path: str | os.PathLike[str]) -> str:
    """Human-readable report: header fields, sections, digests, provenance, verification verdict."""
    info = inspect_json(path)
    lines = [f"bundle   {info['path']}"]
    if info["size"] is not None:
        lines.append(f"size     {info['size']} bytes")
    if info["file_sha256"]:
        lines.append(f"sha256   {info['file_sha256']}")
    if info["header"] is not None:
        lines.append("header")
        for key, value in info["header"].items():
            lines.append(f"  {key:<17} {json.dumps(value, ensure_ascii=False)}")
        lines.append(f"sections (payload starts at byte {info['payload_start']})")
        if not info["sections"]:
            lines.append("  (none)")
        width = max((len(s["name"]) for s in info["sections"]), default=0)
        for s in info["sections"]:
            lines.append(
                f"  {s['name']:<{width}}  offset {s['offset']:>12}  size {s['size']:>12}  sha256 {s['sha256']}"
            )
    trtls_block = info["trtls"]
    if isinstance(trtls_block, dict):
        lines.append("provenance (header trtls record)")
        prov = trtls_block.get("provenance")
        if isinstance(prov, dict) and prov:
            lines += [f"  {k:<24} {json.dumps(v, ensure_ascii=False)}" for k, v in prov.items()]
        else:
            lines.append("  (none recorded)")
    else:
        lines.append("provenance: none in the header (not written by trtls)")
    side = info["sidecar"]
    if side:
        lines.append(
            f"sidecar  {Path(info['path']).name}{SIDECAR_SUFFIX}: origin {json.dumps(side.get('origin'))}, recorded "
            f"{json.dumps(side.get('recorded_at'))}"
        )
    else:
        lines.append("sidecar  none (digests not recorded; run promotion to record them)")
    trtmc = info.get("trtmc")
    if isinstance(trtmc, dict):
        lines.append(f"trtmc    {trtmc['summary']}")
        lines += [f"  not checked: {n}" for n in trtmc["not_checked"]]
    if info["ok"]:
        lines.append("verify   OK")
    else:
        lines.append(f"verify   FAILED ({len(info['problems'])} problem(s))")
        lines += [f"  {BundleProblem(**pr)}" for pr in info["problems"]]
    return terminal_safe("\n".join(lines) + "\n")
