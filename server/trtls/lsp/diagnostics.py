"""Findings → LSP diagnostics, kept apart by origin so one producer never wipes another's.

A publish replaces the whole set for a URI, so the store keeps recipe findings, build findings
(per engine: a new build of `demo` replaces only `demo`'s) and gate findings (per route) separately
and always publishes their union.
"""

from __future__ import annotations

from collections import defaultdict

from lsprotocol import types as lsp

from trtls.core.findings import Finding, Origin, Severity
from trtls.core.tomlpos import SourceMap

SEVERITY = {
    Severity.error: lsp.DiagnosticSeverity.Error,
    Severity.warning: lsp.DiagnosticSeverity.Warning,
    Severity.information: lsp.DiagnosticSeverity.Information,
    Severity.hint: lsp.DiagnosticSeverity.Hint,
}


def to_range(source_map: SourceMap, finding: Finding) -> lsp.Range:
    r = source_map.range(finding.path, finding.on_value)
    return lsp.Range(lsp.Position(r.start_line, r.start_col), lsp.Position(r.end_line, r.end_col))


def to_diagnostic(source_map: SourceMap, finding: Finding) -> lsp.Diagnostic:
    return lsp.Diagnostic(
        range=to_range(source_map, finding),
        message=finding.message,
        severity=SEVERITY[finding.severity],
        code=finding.code,
        code_description=lsp.CodeDescription(href=finding.doc_url),
        source="trtls",
        data={"origin": finding.origin.value, "path": list(finding.path), **finding.data},
    )


class DiagnosticStore:
    def __init__(self) -> None:
        # uri → (origin, key) → findings; key = engine or route name ("" for the recipe itself)
        self._by_uri: dict[str, dict[tuple[Origin, str], list[Finding]]] = defaultdict(dict)

    def set(self, uri: str, origin: Origin, key: str, findings: list[Finding]) -> None:
        self._by_uri[uri][(origin, key)] = list(findings)

    def get(self, uri: str, origin: Origin | None = None, key: str | None = None) -> list[Finding]:
        out: list[Finding] = []
        for (o, k), fs in self._by_uri.get(uri, {}).items():
            if (origin is None or o == origin) and (key is None or k == key):
                out.extend(fs)
        return out

    def keys(self, uri: str, origin: Origin, prefix: str = "") -> list[str]:
        """The keys `origin` has findings under for `uri` (those starting with `prefix`)."""
        return [k for o, k in self._by_uri.get(uri, {}) if o == origin and k.startswith(prefix)]

    def diagnostics(self, uri: str, source_map: SourceMap) -> list[lsp.Diagnostic]:
        return [to_diagnostic(source_map, f) for f in self.get(uri)]
