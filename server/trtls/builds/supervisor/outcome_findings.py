"""What a finished build tells the recipe: its summary turned into located findings.

TRT2xx build outcome and retry advice (on the `[engines.NAME]` table), TRT3xx timing cache (on the
`timing_cache` key), TRT4xx cleanup and artifacts. A successful build has no findings, which is how
the previous build's findings are cleared once their cause is gone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from trtls.core.build_config import setting_path
from trtls.core.builder_errors import describe, describe_memory
from trtls.core.findings import Finding, Origin, Severity

if TYPE_CHECKING:  # a type only: the language server loads this module before pydantic (tests/test_layers.py)
    from trtls.builds.supervisor.orphans import RecoveredBuild
    from trtls.core.recipe import LoadedRecipe
    from trtls.core.summary_record import Summary


def _f(code: str, severity: Severity, message: str, path: tuple, **data: Any) -> Finding:
    return Finding(code, severity, message, path, Origin.build, False, data)


def build_findings(summary: Summary, loaded: LoadedRecipe | None = None) -> list[Finding]:
    """`loaded`: the recipe as the editor holds it, for the quick fixes computed with a finding (TRT207's)."""
    engine = summary.engine or ""  # every record trtls writes names its engine
    table = ("engines", engine)
    outcome = summary.outcome
    if outcome == "built":  # a quarantined cache, the settings the module could not apply, a record not written
        return (
            [f for f in _cache_findings(summary, engine) if f.code == "TRT301"]
            + _not_applied(summary, engine)
            + _portability_findings(summary, engine)
            + _evidence_findings(summary, engine)
        )
    out: list[Finding] = _not_applied(summary, engine) + _failure_findings(summary, engine, loaded)
    where = _stopped_in(summary)
    if outcome == "cancelled" and summary.forced:  # the user asked again: stopped at once, not the builder
        msg = (
            f"build cancelled by {summary.cancelSource}{where} and stopped at once at the user's second "
            f"request (the worker was terminated {_ms(summary.cancelLatencyMs)} after the first, without "
            "waiting for the builder); no engine written"
        )
        out.append(_f("TRT201", Severity.warning, msg, table, buildId=summary.buildId))
    elif outcome == "cancelled":
        msg = (
            f"build cancelled by {summary.cancelSource}{where}; builder returned "
            f"{_ms(summary.cancelLatencyMs)} after the request; no engine written"
        )
        out.append(_f("TRT201", Severity.warning, msg, table, buildId=summary.buildId))
    elif outcome == "failed" and (check := summary.outputCheck or {}).get("writable") is False:
        code = check.get("code") or "TRT405"  # TRT412: a writable folder, but the engine there cannot be replaced
        what = "is not writable" if code == "TRT405" else "cannot take the new engine"
        msg = f"the output folder {check.get('path')} {what} ({check.get('error')}): checked before the build, "
        msg += "nothing was built"
        out.append(_f(code, Severity.error, msg, (*table, "output"), buildId=summary.buildId))
    elif outcome == "failed":
        error = str(summary.error)
        coded = ("TRT231", "TRT233", "TRT410", "TRT411", "TRT413")  # farm: queue, transfer; output lock; evidence
        code = next((c for c in coded if error.startswith(c)), "TRT202")
        out.append(
            _f(
                code,
                Severity.error,
                f"build failed: {error.removeprefix(code + ' ')}",
                table,
                buildId=summary.buildId,
            )
        )
    elif outcome == "forced":
        msg = (
            f"the builder ignored the cancel from {summary.cancelSource}{where} past the grace period and "
            "was terminated (forced)"
        )
        out.append(_f("TRT203", Severity.error, msg, table, buildId=summary.buildId))
    elif outcome == "killed" and str(summary.error).startswith("node lost"):
        node = summary.node or {}
        msg = f"{summary.error}; labels {node.get('labels')}; nothing was committed"
        out.append(_f("TRT232", Severity.error, msg, table, buildId=summary.buildId, node=node.get("nodeId")))
    elif outcome == "killed":
        out.append(
            _f(
                "TRT204",
                Severity.error,
                f"the build worker died by itself ({summary.error}); nothing was committed",
                table,
                buildId=summary.buildId,
            )
        )
    out.append(
        _f(
            "TRT205",
            Severity.information,
            f"retry advice: {summary.retryPolicy} — {summary.retryRule}",
            table,
            buildId=summary.buildId,
            engine=engine,
            retryPolicy=summary.retryPolicy,
        )
    )
    out.extend(_cache_findings(summary, engine))
    out.extend(_cleanup_findings(summary, engine))
    if not str(summary.error).startswith("TRT413"):  # said once: the failure already is TRT413
        out.extend(_evidence_findings(summary, engine))
    return out


def _portability_findings(summary: Summary, engine: str) -> list[Finding]:
    """TRT208 "engine portability": TensorRT-RTX said the engine cannot run on this machine's GPU
    (builds.worker.engine_validity); the engine was built and written all the same."""
    validity = summary.engineValidity or {}
    if validity.get("status") != "invalid":
        return []
    gpu, supported = validity.get("gpuComputeCapability"), validity.get("supportedComputeCapabilities")
    if gpu and supported:
        what = f"this GPU (compute capability {gpu}) is not one it can run on: it supports {' '.join(supported)}"
    else:
        what = str(validity.get("reason") or "TensorRT-RTX answered INVALID")
    rebuild = (
        "; TensorRT-RTX cannot build for this compute capability at all"
        if validity.get("rebuildable") is False
        else "; build it for this GPU (builder.compute_capabilities) to run it here"
    )
    return [
        _f(
            "TRT208",
            Severity.warning,
            f"engine portability: the engine will not load here — {what}{rebuild}",
            ("engines", engine),
            buildId=summary.buildId,
            gpuComputeCapability=gpu,
            supportedComputeCapabilities=supported,
        )
    ]


def _evidence_findings(summary: Summary, engine: str) -> list[Finding]:
    """TRT413 when the build's own records could not be written (`evidenceError`, builds/build_end)."""
    error = summary.evidenceError
    if not error:
        return []
    message = str(error).removeprefix("TRT413 ")
    return [_f("TRT413", Severity.error, message, ("engines", engine), buildId=summary.buildId)]


def _not_applied(summary: Summary, engine: str) -> list[Finding]:
    """TRT140 on each key the loaded module could not apply (the worker read every key back)."""
    module = f"{summary.builderModule} {summary.tensorrtVersion}"
    return [
        _f(
            "TRT140",
            Severity.warning,
            f"'{key}' not applied by {module}: {reason}",
            setting_path(engine, key),
            key=key,
            buildId=summary.buildId,
        )
        for key, reason in ((summary.effectiveSettings or {}).get("not_applied") or {}).items()
    ]


def _failure_findings(summary: Summary, engine: str, loaded: LoadedRecipe | None = None) -> list[Finding]:
    failure = summary.failure
    if failure is None:
        return []
    kind = failure.kind
    if kind == "internal_error":
        return [
            _f(
                "TRT206",
                Severity.error,
                describe(failure) + ". A blind retry fails the same way (see the retry advice)",
                ("engines", engine),
                buildId=summary.buildId,
                layer=failure.layer,
            )
        ]
    if kind == "out_of_memory":
        from trtls.builds.supervisor.memory_fix import memory_fix

        where: tuple[str, ...] = ("engines", engine)
        if failure.resource == "workspace_limit":
            where = setting_path(engine, "workspace_mib")
        finding = _f(
            "TRT207",
            Severity.error,
            f"{describe_memory(failure)}. {failure.advice}",
            where,
            buildId=summary.buildId,
            resource=failure.resource,
            peakRssBytes=failure.peakRssBytes,
            keys=failure.keys,
        )
        fix = memory_fix(loaded, engine, failure.resource)
        if fix is not None:  # the editor turns it into a WorkspaceEdit quick fix (lsp/editor.code_actions)
            finding.data["fix"] = fix
        return [finding]
    if kind in ("setting", "plugin", "precision") and failure.code:
        return [
            _f(
                failure.code,
                Severity.error,
                failure.hint or str(summary.error),
                setting_path(engine, failure.key or ""),
                buildId=summary.buildId,
            )
        ]
    return []


def _ms(value: float | None) -> str:
    if value is None:
        return "an unknown time"
    return f"{value:.1f} ms" if value < 10 else f"{value:.0f} ms"


def _stopped_in(summary: Summary) -> str:
    stopped = [p for p in summary.phaseTree if p.get("status") in ("cancelled", "failed")]
    if not stopped:
        return ""
    deepest = max(stopped, key=lambda p: p["id"].count("."))
    return f" in '{deepest['name']}'"


def _cache_findings(summary: Summary, engine: str) -> list[Finding]:
    cache = summary.timingCache or {}
    decision = cache.get("decision")
    path = ("engines", engine, "timing_cache")
    if decision == "quarantined":
        return [
            _f(
                "TRT301",
                Severity.warning,
                cache.get("reason", "timing cache quarantined"),
                path,
                movedTo=cache.get("quarantined_to"),
            )
        ]
    if decision == "discarded":
        return [_f("TRT303", Severity.information, f"timing cache discarded: {cache.get('reason')}", path)]
    if decision == "not_applicable" and cache.get("path"):
        return [_f("TRT302", Severity.information, f"timing cache not applicable: {cache.get('reason')}", path)]
    return []


def _cleanup_findings(summary: Summary, engine: str) -> list[Finding]:
    status = summary.cleanupStatus
    table = ("engines", engine)
    removed = [a for a in summary.artifacts if a.get("action") in ("removed", "quarantined")]
    intact = summary.previousEngineIntact
    keep = " The previous engine is intact." if intact else ""
    if status == "failed":
        kept = [a["path"] for a in summary.artifacts if a.get("action") == "kept"]
        return [_f("TRT403", Severity.error, f"cleanup failed; left behind: {', '.join(kept)}", table)]
    if status == "quarantined":
        return [
            _f(
                "TRT402",
                Severity.information,
                f"partial files moved to quarantine: {', '.join(a.get('moved_to', '') for a in removed)}.{keep}",
                ("engines", engine, "output"),
            )
        ]
    n = len(removed)
    return [
        _f(
            "TRT401",
            Severity.information,
            f"cleanup: {'removed ' + str(n) + ' partial file(s)' if n else 'no partial engine was left'}; the output "
            f"was not touched.{keep}",
            ("engines", engine, "output"),
        )
    ]


def orphan_finding(engine: str, recovered: RecoveredBuild) -> Finding:
    """TRT404 on the engine table: a recovered build (builds.supervisor.orphans.recover_orphans' row, not its
    record)."""
    return _f(
        "TRT404",
        Severity.warning,
        f"a build of '{engine}' was interrupted when its supervising process died (build {recovered.build_id}): "
        f"{recovered.message}",
        ("engines", engine),
        buildId=recovered.build_id,
    )


def matrix_findings(cell_summaries: list[Summary]) -> dict[str, list[Finding]]:
    """Per engine, the cells' build findings folded into one finding per code: "cells o0-SM89, o1-SM89: …".

    32 cells that all failed the same way are one diagnostic on the engine table, not 32; the cells, their
    build ids and each message stay in the finding's data."""
    by_engine: dict[str, dict[str, list[tuple[str, Finding]]]] = {}
    for s in cell_summaries:
        engine = s.engine or ""
        cell = s.cell or engine
        for f in build_findings(s):
            by_engine.setdefault(engine, {}).setdefault(f.code, []).append((cell, f))
    out: dict[str, list[Finding]] = {}
    for engine, codes in by_engine.items():
        merged: list[Finding] = []
        for code, items in codes.items():
            cells = [c for c, _ in items]
            first = items[0][1]
            if len(items) == 1:
                message = f"cell {cells[0]}: {first.message}" if cells[0] != engine else first.message
            else:
                others = len({f.message for _, f in items}) - 1
                message = f"cells {', '.join(cells)}: {first.message}" + (
                    f" (and {others} other message{'s' if others > 1 else ''}: see each cell's evidence)"
                    if others
                    else ""
                )
            data = {**first.data, "cells": cells, "buildIds": [f.data.get("buildId") for _, f in items]}
            merged.append(Finding(code, first.severity, message, first.path, first.origin, first.on_value, data))
        out[engine] = merged
    return out
