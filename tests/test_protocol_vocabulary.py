"""The extension parses the server's words against the generated vocabularies (issue 28 item 8): every `Literal` of
trtls.core.vocabulary is a `const` array in extension/src/generated/protocol.ts, the drift check fails when a word
was added and the TypeScript not regenerated, and the extension's own source spells no vocabulary again (before, it
kept hand-written lists of the outcomes, outcome kinds, phase statuses and builder modules beside the generated
types)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Literal, get_args, get_origin

from trtls.core import vocabulary
from trtls.schema import protocol, protocol_ts

ROOT = Path(__file__).resolve().parents[1]
EXTENSION_SRC = ROOT / "extension" / "src"
QUOTED = r"'([^'\\]*)'"


def generated_arrays(ts: str) -> dict[str, tuple[str, ...]]:
    """`export const NAME = ['a', 'b'] as const;` → {NAME: ('a', 'b')}."""
    arrays = re.findall(r"^export const (\w+) = \[([^\]]*)\] as const;$", ts, re.M)
    return {name: tuple(re.findall(QUOTED, body)) for name, body in arrays}


def test_every_vocabulary_is_a_const_array_and_a_type_in_the_typescript() -> None:
    ts, arrays = protocol.TS_FILE.read_text(), generated_arrays(protocol.TS_FILE.read_text())
    literals = {n: v for n, v in vars(vocabulary).items() if get_origin(v) is Literal}
    assert len(literals) >= 10 and literals.keys() == protocol_ts.vocabularies().keys()
    for name, literal in literals.items():
        const = protocol_ts.const_name(name)
        assert arrays.get(const) == get_args(literal), f"{const} in protocol.ts is not vocabulary.{name}"
        assert f"export type {name} = (typeof {const})[number];" in ts
    # the names the extension imports
    assert {"BUILD_OUTCOMES", "OUTCOME_KINDS", "PHASE_STATUSES", "BUILDER_PREFERENCES"} <= arrays.keys()
    assert "export function isWord<T extends string>(words: readonly T[], value: unknown): value is T {" in ts


def test_a_word_added_to_the_vocabulary_is_drift_until_regenerated(monkeypatch) -> None:
    """The drift check (`--check`, CI) fails when vocabulary.py has a word the generated TypeScript lacks."""
    assert protocol.TS_FILE not in protocol.drifted()
    monkeypatch.setattr(vocabulary, "PhaseStatus", Literal["running", "done", "cancelled", "failed", "paused"])
    assert protocol.TS_FILE in protocol.drifted()
    assert "'failed', 'paused'] as const;" in protocol_ts.build_ts(protocol.build_schema())


def spelled_word_sets(source: str) -> list[tuple[int, frozenset[str]]]:
    """Every closed set of words a TypeScript source spells by hand, as (line, its words): an array literal or a
    union type of two or more quoted words, the `case 'x':` labels of one switch, and the words one expression is
    compared with (`p.status === 'done' ? … : p.status === 'failed' …`)."""
    found: list[tuple[int, frozenset[str]]] = []

    def line_of(offset: int) -> int:
        return source.count("\n", 0, offset) + 1

    for m in re.finditer(rf"\[\s*{QUOTED}(?:\s*,\s*{QUOTED})+\s*,?\s*\]", source):
        found.append((line_of(m.start()), frozenset(re.findall(QUOTED, m.group(0)))))
    for m in re.finditer(rf"{QUOTED}(?:\s*\|\s*{QUOTED})+", source):
        found.append((line_of(m.start()), frozenset(re.findall(QUOTED, m.group(0)))))
    for m in re.finditer(r"\bswitch\s*\([^)]*\)\s*\{", source):
        depth, end = 1, m.end()
        while depth and end < len(source):
            depth += {"{": 1, "}": -1}.get(source[end], 0)
            end += 1
        labels = re.findall(rf"\bcase\s+{QUOTED}\s*:", source[m.end() : end])
        if len(labels) > 1:
            found.append((line_of(m.start()), frozenset(labels)))
    compared: dict[str, tuple[int, set[str]]] = {}
    for m in re.finditer(rf"(?<![\w.])(?<!typeof )([\w.]+)\s*===?\s*{QUOTED}", source):
        compared.setdefault(m.group(1), (line_of(m.start()), set()))[1].add(m.group(2))
    found += [(line, frozenset(words)) for line, words in compared.values() if len(words) > 1]
    return found


def copies_in(source: str) -> list[str]:
    """The vocabularies a source spells: a set of words equal to one, or three or more of one's words (a partial
    copy drifts the same way)."""
    sets = {name: frozenset(get_args(v)) for name, v in vars(vocabulary).items() if get_origin(v) is Literal}
    out = []
    for line, words in spelled_word_sets(source):
        named = [n for n, vocab in sets.items() if words == vocab or (len(words) >= 3 and words <= vocab)]
        if named:
            out.append(f"line {line}: {sorted(words)} (vocabulary.{named[0]})")
    return out


def test_the_extension_source_spells_no_vocabulary() -> None:
    sources = [p for p in EXTENSION_SRC.rglob("*.ts") if "generated" not in p.parts]
    assert len(sources) > 5
    copies = {str(p.relative_to(EXTENSION_SRC)): c for p in sources if (c := copies_in(p.read_text()))}
    assert copies == {}, "import the generated array (extension/src/generated/protocol.ts) instead"


def test_the_rule_finds_the_copies_the_extension_held() -> None:
    """What buildTree.ts and settings.ts spelled before they parsed against the generated arrays."""
    old = """
const OUTCOMES: readonly string[] = ['built', 'cancelled', 'failed', 'forced', 'killed', 'reused', 'rolled_back'];
export type BuilderModule = 'auto' | 'tensorrt' | 'tensorrt_rtx';
function outcomeIcon(kind: OutcomeKind | null): IconKind {
  switch (kind) {
    case 'ok': return 'ok';
    case 'cancelled': return 'cancelled';
    case 'failed': return 'error';
    case 'refused': return 'warning';
    case null: return 'warning';
  }
}
const icon = p.stalled ? 'warning' : p.status === 'running' ? 'running' : p.status === 'done' ? 'ok'
  : p.status === 'cancelled' ? 'cancelled' : 'error';
export type IconKind = 'running' | 'ok' | 'cancelled' | 'error' | 'warning' | 'pending';
"""
    found = copies_in(old)
    assert [c.split(" (")[-1] for c in found] == [
        "vocabulary.BuildOutcome)",
        "vocabulary.BuilderPreference)",
        "vocabulary.OutcomeKind)",
        "vocabulary.PhaseStatus)",
    ], found


def test_the_builder_module_setting_offers_the_vocabulary() -> None:
    """package.json's `trtls.builderModule` enum (VS Code's settings UI) is what the server accepts."""
    manifest = json.loads((ROOT / "extension" / "package.json").read_text())
    setting = manifest["contributes"]["configuration"]["properties"]["trtls.builderModule"]
    assert tuple(setting["enum"]) == vocabulary.BUILDER_PREFERENCES
