"""Run the trtls benchmarks and merge their figures into docs/performance.md.

    python benchmarks/run_all.py [--quick] [--only NAME ...] [--list] [--output docs/performance.md]

Each benchmark runs in its own process (so none inherits another's imports or threads) and writes its figures as
JSON; this script adds the date, the machine and the versions, and puts every figure next to its target with
PASS/MISS. The page is merged, not rewritten: only the sections of the benchmarks that ran (each marked
`<!-- bench: NAME -->`), their Summary rows (the benchmark's title in the first column), the run line at the top and
"How to reproduce" are replaced; every other section and row keeps its text and the date it names. A benchmark that
fails keeps its previous section, and the run line says so. Benchmarks never run in the test suite: they are timing,
not checks (tests/test_performance_doc.py calls `merge` with made-up results).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Sequence
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


@dataclass(frozen=True)
class Bench:
    """One benchmark script and the section of docs/performance.md its figures go to."""

    name: str  # benchmarks/<name>.py, and the section's marker `<!-- bench: <name> -->`
    title: str  # the Summary rows' first column (how a re-run finds its rows: keep it stable)
    heading: str = ""  # the section's heading, when it says more than the title
    args: tuple[str, ...] = ()
    needs: str = ""  # why it runs only when named with --only (Ray, a 16-core host, a GPU); "" = runs by default

    @property
    def marker(self) -> str:
        return f"<!-- bench: {self.name} -->"


RAY = "Ray (`trtls[farm]`)"
BENCHES: list[Bench] = [
    Bench("bench_monitor_overhead", "Monitor overhead"),
    Bench("bench_cancel_latency", "Cancel latency"),
    Bench("bench_lsp_responsiveness", "LSP responsiveness"),
    Bench("bench_event_throughput", "Event throughput"),
    Bench("bench_hashing", "Hashing throughput (trtls.checkpoint.hashing)"),
    Bench("bench_model_checks", "Model checks while typing (≥ 500 MB ONNX)"),
    Bench("bench_server_start", "Language server: initialize from spawn"),
    Bench(
        "bench_cli_fixed_cost",
        "Fixed cost of trtls build",
        "Fixed cost of trtls build (whole CLI run vs a bare TensorRT-RTX script)",
    ),
    Bench("bench_store", "Engine store"),
    Bench("bench_large_stop", "Stop of `large`"),
    Bench("bench_time_left", "Time left: accuracy on real builds"),
    Bench(
        "bench_time_left_farm",
        "Time left: accuracy on a farm matrix",
        args=("--cells", "16", "--model", "large", "--runs", "2"),
        needs=f"a 16-core host (16 cells on 16 cores) and {RAY}",
    ),
    Bench("bench_capability", "Capability before the build"),
    Bench("bench_reduce", "Triage: `trtls reduce`"),
    Bench("bench_reduce_vs_polygraphy", "Triage: `trtls reduce` vs `polygraphy debug reduce`"),
    Bench("bench_farm", "Build farm (Ray)", needs=RAY),
    Bench(
        "bench_farm_overhead",
        "Build farm overhead",
        args=("--cells", "16", "--model", "large", "--stop-when", "all"),
        needs=f"a 16-core host (16 cells on 16 cores) and {RAY}",
    ),
]
BY_NAME = {b.name: b for b in BENCHES}

DATE = re.compile(r"\b\d{4}-\d{2}-\d{2}\b")
RUN_LINE_START, RUN_LINE_END = "<!-- run_all: last run -->", "<!-- /run_all -->"
# Between the two: the paragraph of the last run of every benchmark that runs on one machine (`run_all.py` without
# --only). A run with --only keeps it as it was, words added by hand included, so the page always says when it was
# last measured whole and what that run left out.
FULL_RUN = "<!-- run_all: last full run -->"
DOC_WIDTH = 118  # docs/performance.md's prose lines


def machine() -> dict[str, str]:
    cpu = next(
        (line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")),
        platform.processor(),
    )
    mem_kb = next(int(line.split()[1]) for line in open("/proc/meminfo") if line.startswith("MemTotal"))
    return {
        "cpu": cpu,
        "cores": str(os.cpu_count()),
        "ram": f"{mem_kb / 1024 / 1024:.1f} GiB",
        "os": platform.platform(),
    }


def versions() -> dict[str, str]:
    def v(name: str) -> str:
        try:
            return version(name)
        except PackageNotFoundError:
            return "not installed"

    import trtls

    return {
        "python": platform.python_version(),
        "trtls": trtls.__version__,
        "tensorrt_rtx": v("tensorrt_rtx_cu13") if v("tensorrt_rtx_cu13") != "not installed" else v("tensorrt_rtx"),
        "ray": v("ray"),
    }


SETTLE_LOAD, SETTLE_MAX_S = 1.0, 150.0


def settle() -> float:
    """Wait (bounded) until the previous benchmark's processes have gone and the 1-minute load average is
    below 1 on this 2-core machine: a benchmark started right after 16 streaming builds measured their tail."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < SETTLE_MAX_S and os.getloadavg()[0] >= SETTLE_LOAD:
        time.sleep(2.0)
    return round(time.monotonic() - t0, 1)


def run_one(bench: Bench, quick: bool, out_dir: Path) -> dict[str, Any]:
    out = out_dir / f"{bench.name}.json"
    cmd = [
        sys.executable,
        str(HERE / f"{bench.name}.py"),
        *bench.args,
        *(["--quick"] if quick else []),
        "--json",
        str(out),
    ]
    print(f"\n### {bench.name}: {' '.join(cmd[1:])}", flush=True)
    settled = settle()
    load0 = os.getloadavg()[0]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    took = time.perf_counter() - t0
    print(proc.stdout, flush=True)
    ran = {
        "bench": bench.name,
        "command": " ".join(["python", f"benchmarks/{bench.name}.py", *bench.args, *(["--quick"] if quick else [])]),
        "seconds": round(took, 1),
        "loadavg": [round(load0, 2), round(os.getloadavg()[0], 2)],
        "settled_s": settled,
        "returncode": proc.returncode,
    }
    if proc.returncode != 0 or not out.is_file():
        return {**ran, "figures": [], "error": proc.stdout[-3000:]}
    return {**json.loads(out.read_text()), **ran}


# ---- rendering --------------------------------------------------------------------------------------------------


def verdict(f: dict[str, Any]) -> str:
    return "" if f.get("pass") is None else ("**PASS**" if f["pass"] else "**MISS**")


def value(f: dict[str, Any]) -> str:
    v = f["value"]
    if v is None:
        return "n/a"
    if isinstance(v, float):
        v = f"{v:,.3f}".rstrip("0").rstrip(".") if abs(v) < 1000 else f"{v:,.0f}"
    elif isinstance(v, int):
        v = f"{v:,}"
    return f"{v} {f.get('unit') or ''}".strip()


def cell(text: Any) -> str:
    """A table cell: a `|` inside would end the cell early, a newline the row."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def measured_on(meta: dict[str, Any]) -> str:
    m = meta["machine"]
    return f"{meta['date']} on {m['cpu']}, {m['cores']} cores"


def summary_rows(bench: Bench, result: dict[str, Any], meta: dict[str, Any], quick: bool) -> list[str]:
    day = meta["date"][:10] + (" (quick)" if quick else "")
    return [
        f"| {bench.title} | {cell(f['name'])} | {cell(value(f))} | {cell(f['target'])} | {verdict(f)} | {day} |\n"
        for f in result.get("figures", [])
        if f.get("target")
    ]


def render_section(bench: Bench, r: dict[str, Any], meta: dict[str, Any], quick: bool) -> str:
    """The benchmark's section: heading, marker, when/where/how it was measured, its figures. No `###` inside:
    a `###` subsection written by hand under it is kept when the section is re-measured."""
    v = meta["versions"]
    waited = f", after waiting {r['settled_s']} s for the machine to settle" if r.get("settled_s") else ""
    out = [
        f"## {bench.heading or bench.title}",
        bench.marker,
        "",
        f"Measured {measured_on(meta)} by `{r['command']}` (through `benchmarks/run_all.py`) — {r['seconds']} s, "
        f"load average {r['loadavg'][0]} → {r['loadavg'][1]}{waited}. trtls {v['trtls']}, TensorRT-RTX "
        f"{v['tensorrt_rtx']}, Python {v['python']}."
        + (" **Quick mode: smoke-run sample sizes, not a measurement.**" if quick else ""),
        "",
    ]
    if r.get("method"):
        out += [f"Method: {r['method']}.", ""]
    if r.get("verbatim"):
        out += ["```", *r["verbatim"], "```", ""]
    if r.get("figures"):
        out += ["| figure | value | target | result | detail |", "|---|---|---|---|---|"]
        for f in r["figures"]:
            out.append(
                f"| {cell(f['name'])} | {cell(value(f))} | {cell(f.get('target') or '—')} | {verdict(f) or '—'} | "
                f"{cell(f.get('detail') or '')} |"
            )
        out.append("")
    if r.get("table"):  # bench_cancel_latency: one row per cancel source
        out += [
            "| source | runs | cancelled | built first | request→return p50/p99 ms | seen→return p50/p99/max ms | "
            "cleanup p50/p99/max ms |",
            "|---|---|---|---|---|---|---|",
        ]
        for t in r["table"]:
            a, b, c = t["cancelLatencyMs"], t["cancelReturnAfterSeenMs"], t["cleanupLatencyMs"]

            def g(d: dict[str, Any], ks: tuple[str, ...]) -> str:
                return " / ".join(f"{d[k]:g}" for k in ks) if d.get("n") else "n/a"

            out.append(
                f"| {t['source']} | {t['runs']} | {t['cancelled']} | {t['builtBeforeCancel']} | "
                f"{g(a, ('p50', 'p99'))} | {g(b, ('p50', 'p99', 'max'))} (n={b.get('n', 0)}) | "
                f"{g(c, ('p50', 'p99', 'max'))} |"
            )
        out.append("")
    for note in r.get("notes", []):
        out += [f"- {note}", ""]
    return "\n".join(out) + "\n"


def paragraph(text: str) -> str:
    return textwrap.fill(text, width=DOC_WIDTH, break_long_words=False, break_on_hyphens=False)


def render_run_line(
    results: Sequence[dict[str, Any]],
    skipped: Sequence[str],
    meta: dict[str, Any],
    cmdline: str,
    *,
    full: bool = False,
    kept_full_run: str | None = None,
) -> str:
    """The page's run paragraph. `full`: this run ran every benchmark that needs nothing more (no --only), and its
    line is also the last full run's; otherwise `kept_full_run`, the previous page's full-run paragraph, stays as it
    was (None: the page had none yet)."""

    def titles(rs: Sequence[dict[str, Any]]) -> str:
        return ", ".join(f'"{BY_NAME[r["bench"]].title}"' for r in rs) or "none"

    done = [r for r in results if not r.get("error")]
    failed = [r for r in results if r.get("error")]
    line = f"Last run: {measured_on(meta)} (`{cmdline}`): re-measured {titles(done)}."
    if failed:
        line += " Failed, their sections and rows kept as they were: "
        line += ", ".join(f'"{BY_NAME[r["bench"]].title}" (exit {r["returncode"]})' for r in failed) + "."
    not_run = ""
    if skipped:
        not_run = " Not run: "
        not_run += "; ".join(f'"{BY_NAME[n].title}" (needs {BY_NAME[n].needs}: `--only {n}`)' for n in skipped) + "."
    intro = paragraph(
        "Each section names the date and the machine it was measured on; a section or Summary row "
        "that a run did not re-measure keeps its own date. `python benchmarks/run_all.py` replaces only "
        "the sections (marked `<!-- bench: NAME -->`) and Summary rows of the benchmarks it ran, and "
        "keeps everything else as written. " + line + ("" if full else not_run)
    )
    if full:
        full_run = paragraph(f"**Last full run: {measured_on(meta)}** (`{cmdline}`)." + not_run)
    elif kept_full_run:
        full_run = kept_full_run.strip("\n")
    else:
        full_run = "No full run on record (`python benchmarks/run_all.py`)."
    return "\n".join([RUN_LINE_START, intro, "", FULL_RUN, full_run, RUN_LINE_END]) + "\n"


def kept_full_run(head: str) -> str | None:
    """The full-run paragraph of a page's run block as it stands (hand-added words included); for a page written
    before the block had one, the sentence that begins `**Last full run` in its run paragraph."""
    if RUN_LINE_START not in head or RUN_LINE_END not in head:
        return None
    block = head[head.index(RUN_LINE_START) + len(RUN_LINE_START) : head.index(RUN_LINE_END)]
    if FULL_RUN in block:
        return block.split(FULL_RUN, 1)[1].strip("\n") or None
    at = block.find("**Last full run")
    return paragraph(" ".join(block[at:].split())) if at >= 0 else None


def render_reproduce() -> str:
    rows = [f"| `{b.name}` | {b.heading or b.title} | {b.needs or '—'} |" for b in BENCHES]
    return "\n".join(
        [
            "## How to reproduce",
            "",
            "```sh",
            "source .venv/bin/activate",
            "python samples/quickstart/make_models.py          # the ONNX models the builds use (same bytes every run)",
            "python benchmarks/run_all.py --list               # the benchmarks, their sections, what each needs",
            "python benchmarks/run_all.py                      # every benchmark that needs nothing more → this page",
            "python benchmarks/run_all.py --only bench_store   # re-measure one section and its Summary rows alone",
            "python benchmarks/bench_cancel_latency.py         # or one alone: it prints its figures (--json, --quick)",
            "```",
            "",
            paragraph(
                "`run_all.py` merges into this page: it replaces the section marked `<!-- bench: NAME -->` of each "
                "benchmark it ran (a new one goes before the hand-written section on the same subject), the Summary "
                "rows whose first column is that benchmark's title, the run line at the top and this section. Every "
                "other section and row is kept as written, with the date it names; a `###` written by hand under a "
                "generated section stays too. A benchmark that fails keeps its previous section, and the run line "
                "says so. Those that need Ray or a 16-core host run only when named with `--only`."
            ),
            "",
            "| benchmark | section | needs (then it runs only when named with `--only`) |",
            "|---|---|---|",
            *rows,
            "",
            "Benchmarks are not tests: nothing here runs under pytest, and no test asserts a duration.",
            "",
        ]
    )


# ---- merging into the existing page -----------------------------------------------------------------------------


def split_sections(doc: str) -> tuple[str, list[str]]:
    """The text before the first `## ` heading, then each `## ` section from its heading to the next one (code
    fences respected). Joined back, the parts are the document byte for byte."""
    parts: list[list[str]] = [[]]
    fenced = False
    for line in doc.splitlines(keepends=True):
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and line.startswith("## "):
            parts.append([])
        parts[-1].append(line)
    return "".join(parts[0]), ["".join(p) for p in parts[1:]]


def heading_of(section: str) -> str:
    return section.split("\n", 1)[0][3:].strip()


def markers(section: str) -> list[str]:
    """The `<!-- bench: NAME -->` lines of a section (a marker quoted inside a sentence is not one)."""
    return [line.strip() for line in section.splitlines() if re.fullmatch(r"<!-- bench: \S+ -->", line.strip())]


def hand_subsections(section: str) -> str:
    """The section from its first `### ` on (written by hand under a generated section: kept on a re-run)."""
    fenced, offset = False, 0
    for line in section.splitlines(keepends=True):
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and line.startswith("### "):
            return section[offset:]
        offset += len(line)
    return ""


def merge_summary(section: str, bench: Bench, rows: list[str]) -> str:
    """Replace the rows whose first column is the benchmark's title (where the first of them stood), or add them at
    the end of the table; every other line is kept as it is."""
    lines = section.splitlines(keepends=True)
    table = [i for i, line in enumerate(lines) if line.startswith("|")]
    if not table:
        return (
            section.rstrip("\n")
            + "\n\n| benchmark | figure | value | target | result | measured |\n"
            + ("|---|---|---|---|---|---|\n" + "".join(rows) + "\n")
        )
    body = table[2:]  # after the header and the |---| line
    ours = [i for i in body if lines[i].split("|")[1].strip() == bench.title]
    at = ours[0] if ours else (body[-1] + 1 if body else table[-1] + 1)
    kept = [line for i, line in enumerate(lines) if i not in ours]
    at -= sum(1 for i in ours if i < at)
    return "".join(kept[:at] + rows + kept[at:])


def merge(
    doc: str,
    results: Sequence[dict[str, Any]],
    meta: dict[str, Any],
    cmdline: str,
    *,
    quick: bool = False,
    skipped: Sequence[str] = (),
    full: bool = False,
) -> str:
    """docs/performance.md with the results of this run merged in (see the module's docstring). `results` are the
    benchmarks' JSON with run_one's keys (`bench`, `command`, `seconds`, `loadavg`, `settled_s`, `returncode`, and
    `error` for one that failed); `meta` has `date`, `machine` and `versions`. `full`: every benchmark that needs
    nothing more ran (no --only)."""
    head, sections = split_sections(doc)
    for r in results:
        if r.get("error"):
            continue  # its previous section and rows stay; the run line names the failure
        bench = BY_NAME[r["bench"]]
        new = render_section(bench, r, meta, quick)
        at = next((i for i, s in enumerate(sections) if bench.marker in markers(s)), None)
        if at is not None:
            sections[at] = new + hand_subsections(sections[at])
        else:  # first time: beside the hand-written section on the same subject, else before the closing sections
            ends = ("Where the time goes", "How to reproduce")
            near = next(
                (i for i, s in enumerate(sections) if heading_of(s).startswith(bench.title) and not markers(s)), None
            )
            end = next((i for i, s in enumerate(sections) if heading_of(s).startswith(ends)), len(sections))
            sections.insert(near if near is not None else end, new)
        rows = summary_rows(bench, r, meta, quick)
        at = next((i for i, s in enumerate(sections) if heading_of(s) == "Summary"), None)
        if at is None:
            sections.insert(0, "## Summary\n\n")
            at = 0
        sections[at] = merge_summary(sections[at], bench, rows)
    run_line = render_run_line(results, skipped, meta, cmdline, full=full, kept_full_run=kept_full_run(head))
    if RUN_LINE_START in head and RUN_LINE_END in head:
        start = head.index(RUN_LINE_START)
        end = head.index(RUN_LINE_END) + len(RUN_LINE_END)
        head = head[:start] + run_line.rstrip("\n") + head[end:]
    else:
        title, _, rest = head.partition("\n")
        head = f"{title}\n\n{run_line}\n{rest.lstrip(chr(10))}" if title.startswith("# ") else f"{run_line}\n{head}"
    at = next((i for i, s in enumerate(sections) if heading_of(s) == "How to reproduce"), None)
    if at is None:
        if sections and not sections[-1].endswith("\n\n"):
            sections[-1] = sections[-1].rstrip("\n") + "\n\n"
        sections.append(render_reproduce())
    else:
        sections[at] = render_reproduce() + ("\n" if at < len(sections) - 1 else "")
    return head + "".join(sections)


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer samples: a smoke run, not a measurement")
    ap.add_argument("--only", nargs="+", metavar="NAME", help="run only these benchmarks (names without .py)")
    ap.add_argument("--list", action="store_true", help="print the benchmarks, their sections and what each needs")
    ap.add_argument("--output", type=Path, default=ROOT / "docs" / "performance.md")
    args = ap.parse_args()
    if args.list:
        for b in BENCHES:
            needs = f"  [only with --only: needs {b.needs}]" if b.needs else ""
            print(f"{b.name:28} {b.heading or b.title}{needs}")
        return
    unknown = [n for n in args.only or [] if n not in BY_NAME]
    if unknown:
        ap.error(f"no such benchmark: {', '.join(unknown)} (python benchmarks/run_all.py --list)")
    if not args.output.parent.is_dir() or (args.output.exists() and not args.output.is_file()):
        ap.error(f"--output {args.output}: not a file in an existing folder (checked before any benchmark runs)")
    chosen = [b for b in BENCHES if (b.name in args.only if args.only else not b.needs)]
    skipped = [] if args.only else [b.name for b in BENCHES if b.needs]
    for name in skipped:
        print(f"skipped {name}: needs {BY_NAME[name].needs} (run it with --only {name})")
    meta = {
        "machine": machine(),
        "versions": versions(),
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
    }
    results = []
    with tempfile.TemporaryDirectory(prefix="trtls-bench-results-") as tmp:
        for bench in chosen:
            results.append(run_one(bench, args.quick, Path(tmp)))
    cmdline = " ".join(
        [
            "python benchmarks/run_all.py",
            *(["--quick"] if args.quick else []),
            *(["--only", *args.only] if args.only else []),
        ]
    )
    doc = args.output.read_text() if args.output.is_file() else "# trtls performance\n"
    args.output.write_text(merge(doc, results, meta, cmdline, quick=args.quick, skipped=skipped, full=not args.only))
    failed = [r["bench"] for r in results if r.get("error")]
    print(
        f"\nmerged {len(results) - len(failed)} section(s) into {args.output}"
        + (f"; failed: {failed}" if failed else "")
    )


if __name__ == "__main__":
    main()
