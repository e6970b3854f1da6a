"""A what-if bundle: the route's bundle with its ONNX model section replaced by another model, written elsewhere
(atomically, `bundle.write_bundle`), so gates 4–5 can run the artifact a rebuild with a recipe edit would deploy
without touching the route's bundle. Every other section, the header and the provenance are kept; the provenance
adds a `what_if` record (what was replaced, by whom, from which bundle). `trtls reduce --route --fix` uses it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

ONNX_SECTIONS = ("model.onnx", "onnx", "model")  # the ONNX model section names gates 3–4 read, in that order


def what_if_bundle(
    source: Path, shown_as: str, model: Path, target: Path, what_if: dict[str, Any]
) -> dict[str, Any] | str:
    """Write `target`: the bundle `source` (named `shown_as` in messages) with its ONNX model section replaced by
    `model`. Returns `{section, replacedSha256}`, or why it cannot be written (the bundle is missing, unreadable,
    carries no ONNX model section)."""
    from trtls.bundle import BundleError, read_bundle, write_bundle

    try:
        bundle = read_bundle(source)
    except (BundleError, OSError) as exc:
        return f"the route's bundle {shown_as} cannot be read ({exc}): build it first (trtls route build)"
    section = next((n for n in ONNX_SECTIONS if n in bundle.sections), None)
    if section is None:
        return f"the route's bundle {shown_as} carries no ONNX model section ({', '.join(ONNX_SECTIONS)})"
    replaced = bundle.section_sha256(section)
    header = {k: v for k, v in bundle.header.items() if k not in ("sections", "trtls")}  # write_bundle fills them
    block = bundle.header.get("trtls")
    provenance = dict(block.get("provenance") or {}) if isinstance(block, dict) else {}
    provenance["what_if"] = {
        **what_if,
        "from_bundle": shown_as,
        "replaced_section": section,
        "replaced_sha256": replaced,
    }
    sections = {n: (model if n == section else bundle.iter_section(n)) for n in bundle.sections}
    try:
        write_bundle(target, header, sections, provenance=provenance)
    except (BundleError, OSError) as exc:
        return f"the what-if bundle could not be written: {exc}"
    return {"section": section, "replacedSha256": replaced}
