"""One vocabulary (issue 28 item 8): each closed set of words is declared once, in `trtls.core.vocabulary`, and the
other tables take it from there. Before, outcome words were written in 7 places, builder module names in 6, phase
statuses in 5, and the copies could differ without any test noticing."""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import get_args

from trtls.core import events, evidence, outcome, phase_tree, protocol, recipe, route, vocabulary, wire
from trtls.core.display import OUTCOME_MARK, STATUS_MARK

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "server" / "trtls"
# copies in modules other sessions were changing when the vocabulary arrived: each is to take its words from
# trtls.core.vocabulary (this list only shrinks)
KNOWN_COPIES = {
    "gates/run.py": "BUILDER_MODULES",
    "triage/trt_layers_run.py": "BUILDER_MODULES",
}


def word_sets() -> dict[frozenset[str], str]:
    out: dict[frozenset[str], str] = {}
    for name in dir(vocabulary):
        words = getattr(vocabulary, name)
        if isinstance(words, tuple) and len(words) > 1 and all(isinstance(w, str) for w in words):
            out.setdefault(frozenset(words), name)
    return out


def spelled_lists(tree: ast.AST) -> list[tuple[int, frozenset[str]]]:
    """Every tuple, list, set or Literal[...] (its subscript is a tuple) of two or more string constants, as (line,
    its words)."""
    found = []
    for node in ast.walk(tree):
        elts = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else []
        if len(elts) > 1 and all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in elts):
            found.append((node.lineno, frozenset(str(e.value) for e in elts if isinstance(e, ast.Constant))))
    return found


def test_no_module_spells_a_vocabulary_again() -> None:
    sets, copies = word_sets(), {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = str(path.relative_to(PACKAGE))
        if rel == "core/vocabulary.py":
            continue
        for line, words in spelled_lists(ast.parse(path.read_text(encoding="utf-8"))):
            if words in sets:
                copies.setdefault(rel, []).append(f"{sets[words]} at line {line}")
    assert {k: v for k, v in copies.items() if k not in KNOWN_COPIES} == {}
    assert sorted(KNOWN_COPIES) == sorted(k for k in copies if k in KNOWN_COPIES), "a known copy is gone: drop it"


def test_the_rule_finds_a_copy() -> None:
    found = spelled_lists(ast.parse('X = ("tensorrt", "tensorrt_rtx")\nY: Literal["done", "cancelled"]\n'))
    assert [(line, word_sets().get(words)) for line, words in found] == [(1, "BUILDER_MODULES"), (2, None)]


def test_the_models_and_tables_take_their_words_from_the_vocabulary() -> None:
    assert protocol.CANCEL_SOURCES is vocabulary.CANCEL_SOURCES is events.CANCEL_SOURCES
    assert events.CancelControl.model_fields["source"].annotation is vocabulary.CancelSource
    assert events.CacheDecisionEvent.model_fields["decision"].annotation is vocabulary.CacheDecision
    assert events.BuildFinished.model_fields["outcome"].annotation is vocabulary.WorkerEnd
    assert events.BuildFinished.model_fields["cleanup_status"].annotation is vocabulary.CleanupStatus
    assert wire.BuildOutcome is vocabulary.BuildOutcome and wire.PhaseStatus is vocabulary.PhaseStatus
    assert phase_tree.PhaseStatus is vocabulary.PhaseStatus and outcome.OutcomeKind is vocabulary.OutcomeKind
    for name in ("OUTCOMES", "CACHE_DECISIONS", "CLEANUP_STATUSES", "RETRY_POLICIES", "VALIDATION_STATUSES"):
        assert getattr(evidence, name) is getattr(vocabulary, name), name
    assert recipe.EngineRecipe.model_fields["builder_module"].annotation is vocabulary.BuilderPreference
    assert get_args(route.EnvironmentPins.model_fields["builder_module"].annotation)[0] is vocabulary.BuilderModule


def test_tables_keyed_by_a_vocabulary_cover_it() -> None:
    assert (*outcome.BUILD_OUTCOME_KIND, *outcome.STORE_OUTCOME_KIND) == vocabulary.BUILD_OUTCOMES
    assert tuple(STATUS_MARK) == vocabulary.PHASE_STATUSES
    assert set(vocabulary.OUTCOMES) <= set(OUTCOME_MARK)


def test_the_generated_schema_carries_the_vocabulary() -> None:
    """What the extension's TypeScript is generated from names the same words."""
    schema = json.loads((ROOT / "docs" / "protocol.schema.json").read_text(encoding="utf-8"))
    enums = {tuple(v["enum"]) for v in _walk(schema) if isinstance(v, dict) and "enum" in v}
    for words in (vocabulary.BUILD_OUTCOMES, vocabulary.PHASE_STATUSES, vocabulary.CANCEL_SOURCES):
        assert words in enums, words


def _walk(node: object):
    yield node
    if isinstance(node, dict):
        for v in node.values():
            yield from _walk(v)
    elif isinstance(node, list):
        for v in node:
            yield from _walk(v)
