"""Gate 1 on a route from an export (no checkpoint: an ONNX file, golden outputs, optional tokenizer files): every
check gate 1 makes on a checkpoint is `not_checked`, by its own name and code, with what is missing for it — nothing
a checkpoint would have shown is claimed. What does stand: the export's files, each hashed (`route.export_route`), are
what the bundle records (gate 3's `bundle.provenance.checkpoint` and `bundle.artifacts`), and gate 4 compares the
deployed ONNX with the golden outputs."""

from __future__ import annotations

from functools import partial

from trtls.core.gate_result import GateCheck, gate_check
from trtls.gates.context import GateContext

GATE = 1
_check = partial(gate_check, GATE)

# gate 1's checks (docs/gates.md, "Every check") and why none can run without a checkpoint
NOT_CHECKED = (
    ("revision_pinned", "TRT501", "an export has no revision to pin; its files are pinned by sha256 in the bundle"),
    ("revision_verified", "TRT513", "an export records no commit: nothing shows which revision of a model it is"),
    ("layout", "TRT502", "no checkpoint folder (and no Hugging Face id) to read a layout or identity from"),
    ("contained", "TRT503", "no checkpoint folder to walk (the export's files are read without following links)"),
    ("config", "TRT504", "an export ships no config.json"),
    ("model_card", "TRT505", "an export ships no model card"),
    ("license", "TRT506", "no model card, so no declared licence is read: allowed_licenses records the review only"),
    ("remote_code", "TRT508", "no checkpoint files to look for code or auto_map in"),
    ("pickle", "TRT509", "no checkpoint weights to scan (the weights are inside the ONNX)"),
    ("weights", "TRT510", "no safetensors to check: the weights are the ONNX's initializers"),
    ("tokenizer", "TRT511", "no checkpoint tokenizer to check the shipped tokenizer files against"),
    ("lock", "TRT512", "no trtls.lock.json for an export: its files' sha256 are in the bundle provenance instead"),
)


def export_source_checks(ctx: GateContext) -> list[GateCheck]:
    """Gate 1's checks, each `not_checked` with its reason (module doc); waivable like any not_checked."""
    path = ("routes", ctx.route_name, "onnx")
    return [
        _check(name, "not_checked", f"the route starts from an export (no checkpoint): {why}", code, path, None, False)
        for name, code, why in NOT_CHECKED
    ]
