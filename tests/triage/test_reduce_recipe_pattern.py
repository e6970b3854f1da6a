"""The failure pattern in the recipe (`[engines.NAME.triage] fail_regex`): checked with the recipe (a pattern that
does not compile is a located TRT102), used by `trtls reduce` when no --fail-regex is given, and the explicit one
wins; the record says which was used. Real TensorRT-RTX reductions of the TopK chain (an API usage error nothing
classifies) in the real CLI process."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from trtls.core.recipe import load_recipe, recipe_json_schema

from .test_reduce_cases import _chain, _engine, _reduce

TOPK = r"K exceeds the maximum value allowed \(3840\)"


def _topk_workspace(ws: Path, triage: str) -> None:
    ops = [("Relu", "relu"), ("Sigmoid", "sig"), ("TopK", "topk"), ("Neg", "neg")]
    _chain(ws / "m.onnx", ops, ["N", 8192], ["N", 5000])
    (ws / "trtls.toml").write_text(_engine("m", "m.onnx", "[N, 8192]", smem=False) + triage)


def test_the_recipes_pattern_reduces_without_a_flag_and_the_explicit_one_wins(tmp_path: Path) -> None:
    _topk_workspace(tmp_path, f"[engines.m.triage]\nfail_regex = '{TOPK}'\n")
    code, record, stderr = _reduce(tmp_path, "m")
    assert record is not None, stderr[-2000:]
    assert record["failRegexFrom"] == "recipe" and record["failRegex"] == [TOPK]
    assert record["failure"]["kind"] == "fail_regex" and "[engines.m.triage] fail_regex" in record["rule"]
    assert code == 0 and record["outcome"] == "reduced" and record["minimal"]["nodeNames"] == ["topk"]
    # an explicit pattern replaces the recipe's (here one the failure does not match: nothing to reduce)
    code, record, stderr = _reduce(tmp_path, "m", "--fail-regex", "a message TensorRT never writes")
    assert record is not None, stderr[-2000:]
    assert record["failRegexFrom"] == "argument" and record["failRegex"] == ["a message TensorRT never writes"]
    assert code == 1 and record["outcome"] == "not_reproduced" and "--fail-regex pattern" in record["causeText"]


def test_a_list_of_patterns_is_any_of_them(tmp_path: Path) -> None:
    _topk_workspace(tmp_path, f"[engines.m.triage]\nfail_regex = ['no such text', '{TOPK}']\n")
    loaded = load_recipe(tmp_path / "trtls.toml")
    assert not loaded.errors and loaded.engine("m").triage.patterns() == ["no such text", TOPK]


def test_a_pattern_that_does_not_compile_is_a_located_recipe_error(tmp_path: Path) -> None:
    _topk_workspace(tmp_path, "[engines.m.triage]\nfail_regex = ['ok', 'K exceeds (']\n")
    loaded = load_recipe(tmp_path / "trtls.toml")
    (finding,) = loaded.errors
    line = loaded.text.splitlines().index("fail_regex = ['ok', 'K exceeds (']") + 1
    assert finding.code == "TRT102" and finding.path == ("engines", "m", "triage", "fail_regex")
    assert "not a regular expression: 'K exceeds ('" in finding.message
    assert loaded.location(finding).endswith(f"trtls.toml:{line}:14")
    # the command says it on the recipe's line, before any build
    proc = subprocess.run(
        [sys.executable, "-m", "trtls", "reduce", str(tmp_path), "--engine", "m"], capture_output=True, text=True
    )
    assert proc.returncode == 2 and f"trtls.toml:{line}:14" in proc.stderr and "TRT102" in proc.stderr
    assert not (tmp_path / ".trtls").exists()


def test_the_schema_editors_load_has_the_key() -> None:
    schema = recipe_json_schema()
    assert schema["$defs"]["EngineRecipe"]["properties"]["triage"]["$ref"] == "#/$defs/TriageSettings"
    triage = schema["$defs"]["TriageSettings"]["properties"]["fail_regex"]
    assert triage["description"].startswith("What this engine's build failure")
    shipped = Path(__file__).resolve().parents[2] / "server" / "trtls" / "schema" / "trtls.schema.json"
    assert json.loads(shipped.read_text()) == schema


NESTED = r"(\w+\s?)+: K exceeds"  # a repeat of an unbounded repeat: exponential backtracking on a near match


def test_a_pattern_that_repeats_a_repeat_is_refused_in_every_face(tmp_path: Path) -> None:
    """`(\\w+\\s?)+` against a TensorRT log line that almost matches backtracks for hours in Python's re, on the loop
    that serves Stop. One rule (core/recipe_triage.pattern_problem) refuses it as TRT102 in the recipe, on
    --fail-regex and on the editor's failRegex, before any build; the possessive or atomic spelling is accepted."""
    from trtls.app.triage import bad_pattern
    from trtls.core.recipe_triage import pattern_problem

    refused = [r"(a+)+$", r"(.*x){20}", NESTED, r"(?:x*)*y", r"(x+x+)+y", r"(a+b?)+c"]
    # a nested repeat whose inner repeat cannot go on where the outer one's next text begins is linear: accepted
    accepted = [TOPK, r"Error Code \d+: .*", r"(\d{1,3}\.)+x", r"(?>\w+\s?)+: K", r"(\w++\s?)+: K", r"(a|b)+",
                r"(\d+\.){3}\d+", r"(\[\w+\] )*ERROR", r"((ab)*c)+"]  # fmt: skip
    assert [p for p in refused if pattern_problem(p) is None] == []
    assert [p for p in accepted if pattern_problem(p) is not None] == []
    assert "can match one text in more than one way" in str(pattern_problem(NESTED))
    deep = "(" * 5000 + "a" + ")" * 5000  # Python's own parser raises RecursionError on it: a refusal, no traceback
    assert "nests its groups too deeply" in str(pattern_problem(deep))
    # the editor's face asks the same rule
    face = bad_pattern([TOPK, NESTED])
    assert face is not None and face.lines[0].startswith(f"TRT102 {NESTED!r} repeats something that can match")
    # the recipe: a located error on the value
    _topk_workspace(tmp_path, f"[engines.m.triage]\nfail_regex = '{NESTED}'\n")
    loaded = load_recipe(tmp_path / "trtls.toml")
    (finding,) = loaded.errors
    assert finding.code == "TRT102" and finding.path == ("engines", "m", "triage", "fail_regex")
    # the terminal: refused before any build, whatever the recipe says
    (tmp_path / "trtls.toml").write_text((tmp_path / "trtls.toml").read_text().split("[engines.m.triage]")[0])
    proc = subprocess.run(
        [sys.executable, "-m", "trtls", "reduce", str(tmp_path), "--engine", "m", "--fail-regex", NESTED],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2 and "TRT102" in proc.stderr and "more than one way" in proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / ".trtls" / "triage").exists()


AMBIGUOUS = r"(.|\s)*: K exceeds"  # a space is both `.` and `\s`: 2^n ways through n spaces on a near match


def test_a_pattern_that_repeats_a_choice_of_overlapping_ways_is_refused_in_every_face(tmp_path: Path) -> None:
    """`(.|\\s)*` (the careless "anything, newlines too") and `(a|aa)+` hold no nested repeat, yet Python's re tries
    every way through a run of characters both branches match: a real `trtls reduce --fail-regex '(.|\\s)*…'` on a
    model whose failure text carries 40 spaces matched for over ten minutes and ignored Ctrl-C. The one rule refuses
    a repeated choice two of whose ways can begin on the same character — in the recipe (`trtls check`) and on
    --fail-regex, before any build — and still accepts exclusive ways and an atomic group."""
    from trtls.core.recipe_triage import pattern_problem

    refused = [AMBIGUOUS, r"(a|aa)+$", r"(\s|.)+x", r"(a?a)+b", r"(x|x)*y", r"(?s)(.|\n)*x", r"(a{1,2})+b"]
    accepted = [r"(.|\n)*: K", r"(foo|bar)+", r"(error|exception)+", r"(?:\w|-)+", r"(ab?)+c", r"(?>.|\s)*: K"]
    assert [p for p in refused if pattern_problem(p) is None] == []
    assert [p for p in accepted if pattern_problem(p) is not None] == []
    assert "a choice two of whose ways can begin on the same character" in str(pattern_problem(AMBIGUOUS))
    # the recipe: `trtls check` says it on the value's line
    _topk_workspace(tmp_path, f"[engines.m.triage]\nfail_regex = '{AMBIGUOUS}'\n")
    check = subprocess.run([sys.executable, "-m", "trtls", "check", str(tmp_path)], capture_output=True, text=True)
    assert check.returncode != 0 and "TRT102" in check.stdout + check.stderr, check.stdout + check.stderr
    # the terminal: refused before any build
    (tmp_path / "trtls.toml").write_text((tmp_path / "trtls.toml").read_text().split("[engines.m.triage]")[0])
    proc = subprocess.run(
        [sys.executable, "-m", "trtls", "reduce", str(tmp_path), "--engine", "m", "--fail-regex", AMBIGUOUS],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2 and "TRT102" in proc.stderr and "a choice two of whose ways" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / ".trtls" / "reduce").exists()


def test_a_pattern_that_matches_the_empty_text_is_refused_it_would_match_every_failure(tmp_path: Path) -> None:
    """`--fail-regex ''` (or `.*`, `x*`, `^`) matches every text, so every failing trial — a parser rejection of a cut,
    any error at all — "still failed", which the classified rule exists to prevent; a real reduction with it reported
    a 6-node "minimal model" of whatever failed. Refused now (TRT102) in every face, before any build."""
    from trtls.core.recipe_triage import pattern_problem

    for pattern in ["", ".*", "x*", "^", "|", "(?:K exceeds)?"]:
        assert "matches the empty text" in str(pattern_problem(pattern)), pattern
    assert pattern_problem(TOPK) is None and pattern_problem(r"^\[E\] Error") is None
    _topk_workspace(tmp_path, "")
    proc = subprocess.run(
        [sys.executable, "-m", "trtls", "reduce", str(tmp_path), "--engine", "m", "--fail-regex", ".*"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2 and "TRT102" in proc.stderr and "matches the empty text" in proc.stderr, proc.stderr
    assert not (tmp_path / ".trtls" / "reduce").exists()
    _topk_workspace(tmp_path, "[engines.m.triage]\nfail_regex = ''\n")
    (finding,) = load_recipe(tmp_path / "trtls.toml").errors
    assert finding.code == "TRT102" and "matches the empty text" in finding.message


def test_each_line_a_pattern_is_matched_against_is_cut(tmp_path: Path) -> None:
    """An accepted pattern is still matched from every start of a line (`\\d+\\.` on a line of digits: the square of
    its length); the failure text cuts each line at LINE_LIMIT characters, and a match within the cut is kept."""
    from trtls.core.summary_record import Summary
    from trtls.triage.signature import LINE_LIMIT, failure_text, regex_signature

    long = "1" * (3 * LINE_LIMIT)
    summary = Summary.model_validate(
        {"outcome": "failed", "error": f"K exceeds {long}", "stderrTail": ["short line", long + " tail"]}
    )
    text = failure_text(summary)
    assert max(len(line) for line in text.split("\n")) == LINE_LIMIT and "short line" in text
    assert "tail" not in text  # beyond the cut
    found = regex_signature(summary, [r"K exceeds \d+"])
    assert found is not None and found.matched is not None and len(found.matched) <= 200
