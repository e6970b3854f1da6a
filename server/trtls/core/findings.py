"""A finding: one located problem, whatever found it (recipe parser, build, cache policy, a gate).

Faces render findings: the LSP layer as diagnostics, the CLI as `file:line:col`, SARIF/JUnit for CI.
The location is a path of TOML keys, turned into a range by the recipe's SourceMap, so a finding made
far from the parser still lands on the exact key that caused it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from trtls.core.codes import DOCS_BASE, Severity, doc_url
from trtls.core.terminal_text import terminal_safe

__all__ = ["DOCS_BASE", "Finding", "Origin", "Severity", "TomlPath"]


TomlPath = tuple[str | int, ...]


class Origin(StrEnum):
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

    def __post_init__(self) -> None:
        # A message quotes names a recipe, a model or a record carried (`engine name 'ok\n'`, an ESC in a key, a
        # right-to-left override in an input's name): escaped here, once, for every face — the terminal's one-line
        # `file:line:col` (a newline forged a second line), the editor's diagnostics, SARIF, JUnit.
        object.__setattr__(self, "message", terminal_safe(self.message, keep_newlines=False))

    @property
    def doc_url(self) -> str:
        """The code's section under docs/codes/ (from the registry, `core.codes`)."""
        return doc_url(self.code)
