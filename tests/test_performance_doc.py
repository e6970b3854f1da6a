"""docs/performance.md says when each figure was measured, and benchmarks/run_all.py merges a run into it without
touching what it did not re-measure. No benchmark runs here: `merge` gets made-up results."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "performance.md"
DATE = re.compile(r"\b20\d\d-[01]\d-[0-3]\d\b")
# a number with a unit of time, rate, ratio or share: what the page calls a figure
FIGURE = re.compile(r"\d(?:[\d,.]*\d)? ?(?:CPU-s|GB/s|MB/s|events/s|reports/s|ms|µs|s|×|%)(?![\w/-])")


def load_run_all() -> ModuleType:
    spec = importlib.util.spec_from_file_location("trtls_bench_run_all", ROOT / "benchmarks" / "run_all.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


run_all = load_run_all()


def sections(doc: str) -> list[tuple[str, str]]:
    """(heading, body) for every `##` and `###` section; a `##`'s body ends at its first `###`."""
    out: list[tuple[str, list[str]]] = []
    fenced = False
    for line in doc.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        if not fenced and re.match(r"#{2,3} ", line):
            out.append((line, []))
        elif out:
            out[-1][1].append(line)
    return [(heading, "\n".join(body)) for heading, body in out]


def first_paragraph(body: str) -> str:
    lines = [line for line in body.splitlines() if not re.fullmatch(r"\s*<!--.*-->\s*", line)]
    text = "\n".join(lines).strip()
    return text.split("\n\n", 1)[0]


def dated(heading: str, body: str) -> bool:
    return bool(DATE.search(heading) or DATE.search(first_paragraph(body)))


def summary_rows(doc: str) -> list[str]:
    body = next(body for heading, body in sections(doc) if heading == "## Summary")
    table = [line for line in body.splitlines() if line.startswith("|")]
    return table[2:]


# ---- the page as it is ---------------------------------------------------------------------------------------------


def test_every_section_with_a_figure_names_the_date_it_was_measured() -> None:
    doc = DOC.read_text()
    undated = [
        heading
        for heading, body in sections(doc)
        if heading != "## Summary" and FIGURE.search(body) and not dated(heading, body)
    ]
    assert not undated, (
        f"docs/performance.md: sections with figures but no YYYY-MM-DD in heading or first paragraph: {undated}"
    )


def test_every_summary_row_carries_a_date_or_belongs_to_a_dated_section() -> None:
    doc = DOC.read_text()
    dated_headings = [heading[3:].strip() for heading, body in sections(doc) if dated(heading, body)]
    rows = summary_rows(doc)
    assert rows
    undated = [
        row
        for row in rows
        if not DATE.search(row) and not any(h.startswith(row.split("|")[1].strip()) for h in dated_headings)
    ]
    assert not undated, f"docs/performance.md: Summary rows without a date: {undated}"


def test_each_benchmark_marker_is_on_the_page_at_most_once_and_names_a_benchmark() -> None:
    doc = DOC.read_text()
    named = re.findall(r"^<!-- bench: (\S+) -->$", doc, re.MULTILINE)
    assert named, "the sections run_all.py generates carry their marker"
    assert sorted(set(named)) == sorted(named), f"a marker twice: {named}"
    assert set(named) <= set(run_all.BY_NAME), f"markers of no benchmark: {set(named) - set(run_all.BY_NAME)}"


def test_how_to_reproduce_is_what_run_all_writes() -> None:
    _, parts = run_all.split_sections(DOC.read_text())
    section = next(p for p in parts if run_all.heading_of(p) == "How to reproduce")
    assert section.rstrip("\n") == run_all.render_reproduce().rstrip("\n")
    assert "python benchmarks/run_all.py --only bench_" in section


# ---- the benchmarks run_all.py knows --------------------------------------------------------------------------------


def test_benches_lists_every_benchmark_in_the_folder() -> None:
    on_disk = {p.stem for p in (ROOT / "benchmarks").glob("bench_*.py")}
    assert {b.name for b in run_all.BENCHES} == on_disk
    assert len({b.title for b in run_all.BENCHES}) == len(run_all.BENCHES), "titles find Summary rows: one each"


def test_list_prints_each_benchmark_and_what_the_skipped_ones_need() -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "run_all.py"), "--list"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    lines = out.splitlines()
    for bench in run_all.BENCHES:
        (line,) = [x for x in lines if x.split()[0] == bench.name]
        assert ("only with --only" in line) == bool(bench.needs), line
    assert "Ray" in next(x for x in lines if x.startswith("bench_farm "))
    assert "16-core" in next(x for x in lines if x.startswith("bench_farm_overhead "))


# ---- merging a run into a page ---------------------------------------------------------------------------------------

HAND = """## Store, by hand

Measured 2026-11-02 by hand: 1.5 s. A generated one would carry `<!-- bench: bench_store -->` on a line of its own.

```
## not a heading: inside a fence
```

"""
SYNTHETIC = (
    """# trtls performance

Some words about the page.

## Summary

| benchmark | figure | value | target | result | measured |
|---|---|---|---|---|---|
| Event throughput | (b) progress reports per second per build | 9.9 reports/s | ≤ 5 /s | **MISS** | 2026-11-01 |
| Store, by hand | hit | 1.5 s | ≤ 0.5 s | **MISS** | 2026-11-02 |
| Event throughput | (a) events | 7 events/s | ≥ 1 | **PASS** | 2026-11-01 |

## Event throughput
<!-- bench: bench_event_throughput -->

Measured 2026-11-01 on Old CPU, 2 cores: 9.9 reports/s.

### Read with care (2026-11-01)

Written by hand: 3 ms of it was the client.

"""
    + HAND
    + """## How to reproduce

old text
"""
)
META = {
    "date": "2026-12-03 14:05 UTC",
    "machine": {"cpu": "Fake CPU", "cores": "16"},
    "versions": {"trtls": "0.1.0", "tensorrt_rtx": "1.7.1.116", "python": "3.11.7"},
}


def result(bench: str, **over: Any) -> dict[str, Any]:
    return {
        "bench": bench,
        "command": f"python benchmarks/{bench}.py",
        "seconds": 12.1,
        "loadavg": [0.5, 0.9],
        "settled_s": 0,
        "returncode": 0,
        "title": "whatever the benchmark calls itself",
        "method": "a flood",
        "figures": [
            {
                "name": "(b) progress reports per second per build",
                "value": 4.67,
                "unit": "reports/s",
                "target": "≤ 5 /s",
                "pass": True,
                "detail": "",
            },
            {"name": "(a) folded", "value": 183718, "unit": "events/s", "target": None, "pass": None, "detail": ""},
        ],
        **over,
    }


def test_merge_replaces_the_rerun_section_and_its_rows_and_keeps_the_rest_byte_for_byte() -> None:
    out = run_all.merge(SYNTHETIC, [result("bench_event_throughput")], META, "python benchmarks/run_all.py --only x")
    head, parts = run_all.split_sections(out)
    assert head.startswith("# trtls performance\n") and "Some words about the page.\n" in head
    assert HAND in out, "a section no benchmark ran is kept byte for byte (a fenced '## ' is not a heading)"
    assert "| Store, by hand | hit | 1.5 s | ≤ 0.5 s | **MISS** | 2026-11-02 |\n" in out
    rows = summary_rows(out)
    assert rows == [
        "| Event throughput | (b) progress reports per second per build | 4.67 reports/s | ≤ 5 /s | **PASS** | "
        "2026-12-03 |",
        "| Store, by hand | hit | 1.5 s | ≤ 0.5 s | **MISS** | 2026-11-02 |",
    ], "its old rows replaced where the first stood; a figure with no target has no row"
    (section,) = [p for p in parts if "<!-- bench: bench_event_throughput -->" in p]
    assert section.startswith("## Event throughput\n<!-- bench: bench_event_throughput -->\n")
    assert "Measured 2026-12-03 14:05 UTC on Fake CPU, 16 cores by `python benchmarks/bench_event_throughput.py`" in (
        section
    )
    assert "| (a) folded | 183,718 events/s |" in section
    assert "9.9 reports/s" not in out and "Old CPU" not in out
    assert section.endswith("### Read with care (2026-11-01)\n\nWritten by hand: 3 ms of it was the client.\n\n"), (
        "a ### written by hand under a generated section stays"
    )
    run_line = head[head.index(run_all.RUN_LINE_START) : head.index(run_all.RUN_LINE_END)]
    assert "2026-12-03 14:05 UTC on Fake CPU, 16 cores" in " ".join(run_line.split())
    assert 're-measured "Event throughput"' in " ".join(run_line.split())
    assert parts[-1] == run_all.render_reproduce() and "old text" not in out
    for heading, body in sections(out):
        if heading != "## Summary" and FIGURE.search(body):
            assert dated(heading, body), heading

    again = run_all.merge(out, [result("bench_event_throughput")], META, "python benchmarks/run_all.py")
    assert again.count("<!-- bench: bench_event_throughput -->") == 1
    assert again.count(run_all.RUN_LINE_START) == 1
    assert summary_rows(again) == rows


def run_block(doc: str) -> str:
    head, _ = run_all.split_sections(doc)
    return head[head.index(run_all.RUN_LINE_START) : head.index(run_all.RUN_LINE_END)]


def test_a_run_with_only_keeps_the_last_full_runs_paragraph_and_a_full_run_replaces_it() -> None:
    full = run_all.merge(
        SYNTHETIC,
        [result("bench_event_throughput")],
        META,
        "python benchmarks/run_all.py",
        full=True,
        skipped=["bench_farm"],
    )
    block = run_block(full)
    said = " ".join(block.split(run_all.FULL_RUN)[1].split())
    assert said.startswith(
        "**Last full run: 2026-12-03 14:05 UTC on Fake CPU, 16 cores** (`python benchmarks/run_all.py`)"
    )
    assert 'Not run: "Build farm (Ray)"' in said, "what the full run left out stays with it"
    # words added by hand to the full run's paragraph survive a run with --only, byte for byte
    full = full.replace(run_all.RUN_LINE_END, "Added by hand: the farm on 2026-12-04.\n" + run_all.RUN_LINE_END, 1)
    kept = run_block(full).split(run_all.FULL_RUN)[1]
    later = {**META, "date": "2026-12-04 09:00 UTC"}
    partial = run_all.merge(full, [result("bench_event_throughput")], later, "python benchmarks/run_all.py --only x")
    assert run_block(partial).split(run_all.FULL_RUN)[1] == kept
    assert "Last run: 2026-12-04 09:00 UTC" in " ".join(run_block(partial).split(run_all.FULL_RUN)[0].split())
    again = run_all.merge(partial, [result("bench_event_throughput")], later, "python benchmarks/run_all.py", full=True)
    assert "Added by hand" not in again, "a full run writes its own paragraph"
    assert "**Last full run: 2026-12-04 09:00 UTC" in " ".join(run_block(again).split())


def test_a_page_from_before_the_full_run_block_keeps_its_last_full_run_sentence() -> None:
    old = SYNTHETIC.replace(
        "Some words about the page.\n",
        f"{run_all.RUN_LINE_START}\nIntro. Last run: then. **Last full run: 2026-11-30** on Old CPU, its\nnotes."
        f"\n{run_all.RUN_LINE_END}\n",
    )
    out = run_all.merge(old, [result("bench_event_throughput")], META, "python benchmarks/run_all.py --only x")
    assert run_block(out).split(run_all.FULL_RUN)[1].strip() == "**Last full run: 2026-11-30** on Old CPU, its notes."
    assert "Last run: then" not in out


def test_merge_keeps_a_failed_benchmarks_section_and_says_so() -> None:
    failed = result("bench_event_throughput", figures=[], error="Traceback ...", returncode=1)
    out = run_all.merge(SYNTHETIC, [failed], META, "python benchmarks/run_all.py", skipped=["bench_farm"])
    _, old_parts = run_all.split_sections(SYNTHETIC)
    _, parts = run_all.split_sections(out)
    assert parts[:3] == old_parts[:3], "Summary, the section and the hand-written one as they were"
    said = " ".join(out.split())
    assert 'Failed, their sections and rows kept as they were: "Event throughput" (exit 1)' in said
    assert 'Not run: "Build farm (Ray)" (needs Ray (`trtls[farm]`): `--only bench_farm`)' in said


def test_merge_puts_a_first_section_before_the_hand_written_one_on_its_subject() -> None:
    doc = SYNTHETIC.replace("## Store, by hand", "## Engine store: build avoidance (issue 19)")
    store = result(
        "bench_store",
        figures=[{"name": "hit", "value": 0.19, "unit": "s", "target": "≤ 0.5 s", "pass": True, "detail": "a|b"}],
    )
    out = run_all.merge(doc, [store], META, "python benchmarks/run_all.py --only bench_store")
    _, parts = run_all.split_sections(out)
    headings = [run_all.heading_of(p) for p in parts]
    assert headings == [
        "Summary",
        "Event throughput",
        "Engine store",
        "Engine store: build avoidance (issue 19)",
        "How to reproduce",
    ]
    assert "| hit | 0.19 s | ≤ 0.5 s | **PASS** | a\\|b |" in parts[2], "a | inside a cell is escaped"
    assert summary_rows(out)[-1] == "| Engine store | hit | 0.19 s | ≤ 0.5 s | **PASS** | 2026-12-03 |"
    assert "Measured 2026-11-01 on Old CPU, 2 cores: 9.9 reports/s." in parts[1], "the other benchmark's section kept"
    assert parts[3] == HAND.replace("## Store, by hand", "## Engine store: build avoidance (issue 19)"), (
        "a marker quoted in a sentence does not make a section generated"
    )


def test_only_refuses_a_name_that_is_no_benchmark_before_running_any() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "run_all.py"), "--only", "bench_nothing", "--output", "/dev/null/x"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2 and "no such benchmark: bench_nothing" in done.stderr
