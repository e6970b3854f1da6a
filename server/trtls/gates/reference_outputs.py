"""Gate 4's reference outputs, independent of the export (route key `reference`):

* `checkpoint` — a numpy forward pass computed from the checkpoint's own safetensors weights
  (`checkpoint.forward`, families tiny-mlp/mlp and bert, with a sentence-transformers checkpoint's pooling and
  normalization from its modules.json as `sentence_embedding`), reading only the files gate 1's layout rules accept
  (contained, no symlink out, headers validated);
* `golden` — outputs recorded elsewhere (`golden_outputs`: Polygraphy RunResults JSON with the framework, its
  version and the sha256 of the inputs they were computed from), compared only when that sha256 is the route's
  `reference_inputs` file's; who recorded them is read from the recorder record beside them
  (`checkpoint.golden.read_recorder`), which TRT812 judges;
* a runtime name (`onnx.reference`, …) — runs the same exported ONNX as the runtime under test: it still
  answers, but cannot see an export bug, so `parity.reference_independent` (TRT812) is `not_checked`.

`reference_outputs(ctx, feeds)` returns a `RunResult` (status ok with one output dict per feed, or unavailable /
error with the reason) and the provenance recorded as evidence.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from trtls.fs import TooLarge, parse_json, read_text
from trtls.runtimes import RunResult

MAX_CONFIG = 16 * 1024 * 1024


def checkpoint_outputs(ctx: Any, feeds: Sequence[dict[str, np.ndarray]]) -> tuple[RunResult, dict[str, Any]]:
    from trtls.checkpoint.forward import FAMILIES, ForwardError, load_safetensors, reference_forward, st_pooling
    from trtls.gates.source import list_files, resolve_layout

    ck = ctx.route.checkpoint
    layout = resolve_layout(ctx.resolve(ck.path), ck.revision, ck.id)
    if layout.problem or layout.files_dir is None:
        return RunResult("unavailable", f"checkpoint files cannot be located: {layout.problem}"), {}
    files, refused = list_files(layout)
    if refused:
        return RunResult("unavailable", "checkpoint entries refused (never followed): " + refused[0][0]), {}
    by_rel = {f.rel: f.real for f in files}
    if "config.json" not in by_rel:
        return RunResult("unavailable", "the checkpoint has no config.json (model_type names the family)"), {}
    try:
        try:
            config = parse_json(read_text(by_rel["config.json"], limit=MAX_CONFIG, follow=True))
        except TooLarge:
            raise ValueError("config.json is larger than 16 MiB") from None
        if not isinstance(config, dict):
            raise ValueError("config.json is not a JSON object")
    except (OSError, ValueError) as exc:
        return RunResult("unavailable", f"config.json: {exc}"), {}
    family = str(config.get("model_type"))
    evidence: dict[str, Any] = {"reference": "checkpoint", "family": family}
    if family not in FAMILIES:
        return (
            RunResult(
                "unavailable",
                f"no reference forward pass for model_type {family!r} (known: {', '.join(FAMILIES)}): "
                'record golden outputs instead (reference = "golden")',
            ),
            evidence,
        )
    shards = sorted(rel for rel in by_rel if rel.endswith(".safetensors") and "/" not in rel)
    evidence["weights"] = shards
    try:
        pooling = st_pooling(by_rel)  # sentence-transformers: sentence_embedding, read apart from the exporter
        if pooling is not None:
            evidence["pooling"] = pooling
        weights = load_safetensors([by_rel[r] for r in shards])
        outputs = [reference_forward(weights, config, feed, pooling) for feed in feeds]
    except ForwardError as exc:
        return RunResult("error", f"checkpoint forward pass: {exc}"), evidence
    evidence["computed"] = "numpy float64 forward pass from the checkpoint's safetensors weights"
    return RunResult("ok", outputs=outputs), evidence


def golden_outputs(ctx: Any, inputs: Sequence[Path], n_feeds: int) -> tuple[RunResult, dict[str, Any]]:
    from trtls.checkpoint.golden import GoldenError, load_golden
    from trtls.core.sha256 import sha256_file

    ref = ctx.route.golden_outputs
    if ref is None:
        return RunResult("unavailable", 'reference = "golden" but the route has no golden_outputs'), {}
    evidence: dict[str, Any] = {
        "reference": "golden",
        "path": ref.path,
        "framework": ref.framework,
        "framework_version": ref.framework_version,
        "inputs_sha256": ref.inputs_sha256,
    }
    actual = [sha256_file(p) for p in inputs]
    evidence["reference_inputs_sha256"] = actual
    if actual != [ref.inputs_sha256]:
        return (
            RunResult(
                "unavailable",
                f"the golden outputs were computed from inputs with sha256 {ref.inputs_sha256[:12]}…, not the route's "
                f"reference_inputs ({', '.join(a[:12] + '…' for a in actual)}): they prove nothing about these inputs",
            ),
            evidence,
        )
    try:
        golden = load_golden(ctx.resolve(ref.path))
    except (GoldenError, OSError) as exc:
        return RunResult("error", str(exc)), evidence
    evidence["runner"] = golden.runner
    from trtls.checkpoint.golden import read_recorder

    recorder = read_recorder(ctx.resolve(ref.path), Path(ctx.recipe_dir))
    evidence["recorder" if isinstance(recorder, dict) else "recorder_problem"] = recorder
    if len(golden.outputs) < n_feeds:
        return RunResult("error", f"{len(golden.outputs)} golden iterations for {n_feeds} reference feeds"), evidence
    return RunResult("ok", outputs=golden.outputs[:n_feeds]), evidence
