"""A finding: one located problem, whatever found it (recipe parser, build, cache policy, a gate).

Faces render findings: the LSP layer as diagnostics, the CLI as `file:line:col`, SARIF/JUnit for CI.
The location is a path of TOML keys, turned into a range by the recipe's SourceMap, so a finding made
far from the parser still lands on the exact key that caused it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any


def _docs_base() -> str:
    """Where code links point: the docs beside this checkout when present (editable installs, CI),
    else the published copy."""
    local = Path(__file__).resolve().parents[3] / "docs"
    if (local / "diagnostics.md").is_file():
        return local.as_uri()
    return "https://github.com/trtls/trtls/blob/main/docs"


DOCS_BASE = _docs_base()
# Which page documents which code range (each page has one `## TRTnnn` section per code).
DOC_PAGES = {
    "1": "diagnostics.md",
    "2": "diagnostics.md",
    "3": "diagnostics.md",
    "4": "diagnostics.md",
    "5": "diagnostics-gates.md",
    "6": "diagnostics-gates.md",
    "7": "diagnostics-gate3.md",
    "8": "diagnostics-gates45.md",
    "9": "diagnostics-gates45.md",
}

TomlPath = tuple[str | int, ...]


class Severity(str, Enum):
    error = "error"
    warning = "warning"
    information = "information"
    hint = "hint"


class Origin(str, Enum):
    """Which producer owns a finding; diagnostics of one origin never wipe another's."""

    recipe = "recipe"
    build = "build"
    gates = "gates"


@dataclass(frozen=True)
class Finding:
    code: str  # stable, e.g. "TRT101"
    severity: Severity
    message: str
    path: TomlPath = ()  # TOML key path inside the recipe; () = whole file
    origin: Origin = Origin.recipe
    on_value: bool = False  # point at the value rather than the key
    data: dict[str, Any] = field(default_factory=dict)  # machine-readable extras (quick fixes, figures)

    @property
    def doc_url(self) -> str:
        # TRTn00 (gate n could not run) lives with the orchestrator's codes
        page = (
            "diagnostics-gates.md"
            if self.code.endswith("00") and self.code[3] in "56789"
            else DOC_PAGES.get(self.code[3:4], "diagnostics.md")
        )
        return f"{DOCS_BASE}/{page}#{self.code.lower()}"
