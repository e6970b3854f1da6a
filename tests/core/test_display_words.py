"""Display rules written once (issue 28 item 9): "why rebuilt" in one phrasing before, during and after a build,
"N s ago", the quiet gap, sizes in one unit (KiB/MiB/GiB), and the evidence's verdict lines — each one function in
`trtls.core.display`, and no other module formats them itself. Before: four phrasings of why rebuilt in three files,
`ago` in builds/avoidance/reuse.py, the quiet gap `.2f` in the report and `.1f` in the trace, decimal MB in the hover
and in
`trtls gc`, the CLI and the report composing the evidence lines each their own way."""

from __future__ import annotations

import re
from pathlib import Path

from trtls.core.display import (
    ago,
    evidence_lines,
    human_bytes,
    phase_detail,
    quiet_text,
    reasons_text,
    rebuilding_text,
    rebuilt_text,
    will_rebuild_text,
)
from trtls.core.summary_record import Summary

PACKAGE = Path(__file__).resolve().parents[2] / "server" / "trtls"
CHANGES = ["optimization_level 3 → 5", "models/demo.onnx: bytes"]
# a rule written outside core/display.py: what it looks like in source
OWN_FORMATS = {
    "quiet gap": re.compile(r"""f["']quiet \{"""),
    "why rebuilt": re.compile(r"""["'](rebuilt because|will rebuild|rebuilding \{)"""),
    "ago": re.compile(r"""s ago["']"""),
    "decimal MB": re.compile(r"""/ 1e6:\.\df\} MB|\{mb:\.\df\} MB"""),
}


def test_why_rebuilt_reads_the_same_before_during_and_after() -> None:
    assert reasons_text(CHANGES) == "optimization_level 3 → 5; models/demo.onnx: bytes"
    assert will_rebuild_text(CHANGES) == f"will rebuild because: {reasons_text(CHANGES)}"
    assert rebuilding_text("demo", CHANGES) == f"rebuilding demo because: {reasons_text(CHANGES)}"
    assert rebuilt_text(Summary.written({"rebuiltBecause": CHANGES})) == f"rebuilt because: {reasons_text(CHANGES)}"
    assert rebuilt_text(Summary.written({"rebuiltBecause": []})) is None and rebuilt_text(None) is None


def test_ago_in_one_place() -> None:
    now = 1_000_000.0
    assert [ago(now - s, now) for s in (0, 89, 90, 5399, 5400, 172_799, 172_800)] == [
        "0 s ago", "89 s ago", "2 min ago", "90 min ago", "2 h ago", "48 h ago", "2 days ago"]  # fmt: skip
    assert ago(now + 5, now) == "0 s ago"  # a clock a little ahead is not "in the future"
    assert ago(None) == ago("yesterday") == ago(True) == ago(float("nan")) == "at an unknown time"


def test_the_quiet_gap_reads_as_a_phase_row_reads_it() -> None:
    assert quiet_text(0.25) == "quiet 0.3 s" and quiet_text(42) == "quiet 42 s"
    assert quiet_text(42) in phase_detail("running", 1, 3, 50.0, quiet_s=42)


def test_sizes_in_binary_units() -> None:
    assert [human_bytes(n) for n in (512, 1536, 138_000_000, 3 * 1024**3)] == [
        "512 B", "1.5 KiB", "131.6 MiB", "3.0 GiB"]  # fmt: skip


def test_evidence_lines() -> None:
    s = {
        "timingCacheMode": "cold",
        "timingCache": {"reason": "no timing cache configured"},
        "cleanupStatus": "cleaned",
        "previousEngine": "intact",
        "retryPolicy": "retry_with_cache",
        "retryRule": "the cancelled build never wrote its cache back",
        "validationStatus": "not_applicable",
        "validationNote": "nothing was built",
    }
    assert evidence_lines(Summary.written(s)) == [
        ("timing cache", "cold — no timing cache configured"),
        ("cleanup", "cleaned; previous engine intact (byte for byte)"),
        ("retry", "retry_with_cache — the cancelled build never wrote its cache back"),
        ("validation", "not_applicable (nothing was built)"),
    ]


def test_no_other_module_formats_these_rules() -> None:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = str(path.relative_to(PACKAGE))
        if rel == "core/display.py":
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            found += [f"{rel}:{n} {rule}" for rule, pattern in OWN_FORMATS.items() if pattern.search(line)]
    assert found == []


def test_the_scan_finds_what_the_faces_used_to_write() -> None:
    old = [
        '"name": f"quiet {b - a:.1f} s",',
        'say(f"rebuilding {engine}: " + "; ".join(use.changes))',
        'return "will rebuild: " + "; ".join(self.changes)',
        'return f"{s:.0f} s ago"',
        'return f"**{model.path.name}** ({model.size / 1e6:.1f} MB, IR {model.ir_version})"',
    ]
    assert [[r for r, p in OWN_FORMATS.items() if p.search(line)] for line in old] == [
        ["quiet gap"], ["why rebuilt"], ["why rebuilt"], ["ago"], ["decimal MB"]]  # fmt: skip
