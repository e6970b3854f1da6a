"""Gate 4's TRT812, `parity.reference_independent`: is the reference independent of the export under test? The
checkpoint's own forward pass is; golden outputs are judged from the recorder record beside them (who ran what,
`checkpoint.golden.read_recorder`), never from the `framework` typed in the recipe; a runtime on the same ONNX is
not (not_checked).

A recorder record is a file anyone can write, so it is not the last word: golden outputs that every output of the
deployed model matches bit for bit (error exactly 0 on every element, `bit_identical`) hold whatever the record says.
That is the telltale of outputs recorded from the deployed ONNX itself: an independent implementation (another
framework, the checkpoint's own weights in another library) differs from the export in the last bits of a float."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from trtls.core.findings import TomlPath
from trtls.core.gate_result import GateCheck, gate_check

_check = partial(gate_check, 4)


def export_digests(ctx: Any, artifact: Any) -> dict[str, str]:
    """sha256 → what it is, of every ONNX that is the export under test: the ONNX the bundle deploys (extracted), the
    route's `onnx` and the engine's ONNX on disk. Golden outputs recorded by running one of them are not
    independent of it."""
    from trtls.core.sha256 import sha256_file

    found: dict[str, str] = {}
    files: list[tuple[Path, str]] = []
    if not isinstance(artifact, str) and str(artifact[1]).endswith(".onnx"):
        files.append((Path(artifact[1]), f"the ONNX in {ctx.route.bundle}"))
    recipe = getattr(ctx.loaded, "recipe", None)
    engine = recipe.engines.get(ctx.route.engine) if recipe is not None and ctx.route.engine else None
    for rel in (getattr(ctx.route, "onnx", None), getattr(engine, "onnx", None)):
        if rel:
            files.append((ctx.resolve(rel), str(rel)))
    for path, label in files:
        try:
            if path.is_file():
                found.setdefault(sha256_file(path), label)
        except OSError:
            continue
    return found


def bit_identical(checks: Sequence[GateCheck]) -> list[str]:
    """The outputs compared (`parity.tolerance:<output>`, every input set) when each one matched the reference bit for
    bit — max abs error exactly 0 over at least one element; empty when any output differs or none was measured."""
    outputs: list[str] = []
    for c in checks:
        if not c.name.startswith("parity.tolerance:"):
            continue
        sets = c.evidence.get("input_sets")
        evs = [e for e in sets.values() if isinstance(e, Mapping)] if isinstance(sets, Mapping) else [c.evidence]
        for ev in evs:
            stats = ev.get("stats")
            if not isinstance(stats, Mapping) or stats.get("max_abs") != 0.0 or not stats.get("elements"):
                return []
        outputs.append(c.name.removeprefix("parity.tolerance:"))
    return outputs


def _golden_independence(
    route: Any, ev: Mapping[str, Any], path: TomlPath, exports: Mapping[str, str], identical: Sequence[str] = ()
) -> GateCheck:
    """TRT812 for golden outputs: judged from the recorder record beside them (who ran what), never from the
    `framework` typed in the recipe; a typed framework the record contradicts is said."""
    record = ev.get("recorder")
    if not isinstance(record, dict):
        why = ev.get("recorder_problem") or "the golden outputs were not read"
        return _check(
            "parity.reference_independent",
            "not_checked",
            f"{why}: who recorded them is not on record (framework = {ev.get('framework')!r} in the recipe is a "
            "claim, not a record); record them with a recorder record (docs/gates.md, golden outputs)",
            "TRT812",
            path,
            dict(ev),
        )
    runner = record.get("runner") or {}
    ran = record.get("ran") or {}
    who = f"{runner.get('name')} {runner.get('version') or ''}".strip()
    typed = str(ev.get("framework") or "")
    said = (
        f"; the recipe says framework = {typed!r}, the record says {runner.get('name')}"
        if typed and typed.lower() != str(runner.get("name", "")).lower()
        else ""
    )
    evidence = dict(ev)
    if ran.get("kind") == "onnx":
        digest = str(ran.get("sha256") or "")
        if digest in exports:
            return _check(
                "parity.reference_independent",
                "hold",
                f"the golden outputs were recorded by {who} running {ran.get('file')} (sha256 {digest[:12]}…), which "
                f"is {exports[digest]}: the export under test checked against itself — an export bug would pass "
                f"unseen{said}",
                "TRT812",
                path,
                evidence,
            )
        if not digest:
            return _check(
                "parity.reference_independent",
                "not_checked",
                f"the recorder record says {who} ran an ONNX but not which (no sha256){said}",
                "TRT812",
                path,
                evidence,
            )
        what = f"{ran.get('file')} (sha256 {digest[:12]}…), not the export this route deploys"
    elif ran.get("kind") == "checkpoint":
        what = f"the checkpoint {ran.get('id') or ''} {ran.get('revision') or ''}".rstrip() + "'s own weights"
    else:
        what = ""
    if identical:  # the record is a claim too: bit-identical outputs say where they came from
        return _check(
            "parity.reference_independent",
            "hold",
            f"every output the deployed model gives ({', '.join(identical)}) matches the golden outputs bit for bit "
            "(error exactly 0 on every element): the telltale of golden outputs recorded from the deployed ONNX "
            "itself, since an independent implementation differs in the last bits; the recorder record says "
            f"{who} ran {what or 'something'} — a record is a file anyone can write, the numbers are not. Record them "
            f"from the checkpoint or the original model in its own framework{said}",
            "TRT812",
            path,
            {**evidence, "bit_identical": list(identical)},
        )
    if not what:
        return _check(
            "parity.reference_independent",
            "not_checked",
            f"the recorder record does not say what {who} ran (ran.kind {ran.get('kind')!r}: onnx or checkpoint){said}",
            "TRT812",
            path,
            evidence,
        )
    return _check(
        "parity.reference_independent",
        "pass",
        f"golden outputs recorded by {who} running {what}, from inputs sha256 {str(ev.get('inputs_sha256'))[:12]}…"
        + said,
        "TRT812",
        path,
        evidence,
    )


def reference_independence(
    route: Any,
    ref_evidence: Mapping[str, Any],
    base: TomlPath,
    exports: Mapping[str, str] | None = None,
    identical: Sequence[str] = (),
) -> GateCheck:
    """TRT812: the reference does not run the export under test (so an exporter bug shows). `identical`: the outputs
    that matched golden outputs bit for bit, all of them (`bit_identical`)."""
    path = base + ("reference",)
    if route.reference == "checkpoint":
        return _check(
            "parity.reference_independent",
            "pass",
            f"reference outputs computed from the checkpoint's weights ({ref_evidence.get('family', '?')} forward "
            "pass in numpy), not from the exported ONNX",
            "TRT812",
            path,
            dict(ref_evidence),
        )
    if route.reference == "golden":
        return _golden_independence(route, ref_evidence, path, exports or {}, identical)
    return _check(
        "parity.reference_independent",
        "not_checked",
        f"the reference {route.reference} runs the same exported ONNX as the runtime under test: an export bug "
        'would pass unseen (use reference = "checkpoint" or "golden")',
        "TRT812",
        path,
    )
