"""Run every trtls benchmark, one after another, and write docs/performance.md.

    python benchmarks/run_all.py [--quick] [--only NAME ...] [--output docs/performance.md]

Each benchmark runs in its own process (so none inherits another's imports or threads) and writes its
figures as JSON; this script adds the machine, the versions and the date, and puts every figure next
to its target with PASS/MISS. Benchmarks never run in the test suite: they are timing, not checks.
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
import time
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

BENCHES: list[tuple[str, list[str]]] = [
    ("bench_monitor_overhead", []),
    ("bench_cancel_latency", []),
    ("bench_lsp_responsiveness", []),
    ("bench_event_throughput", []),
    ("bench_hashing", []),
    ("bench_model_checks", []),
    ("bench_farm", []),  # needs trtls[farm] (Ray)
    ("bench_farm_overhead", []),  # needs trtls[farm] (Ray): CPU beyond the builds, fixed cost, stop (issue 23)
    ("bench_reduce", []),  # trials per real case and the stop of a reduction (issue 21)
]


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
        "pygls": v("pygls"),
        "lsprotocol": v("lsprotocol"),
        "pydantic": v("pydantic"),
    }


SETTLE_LOAD, SETTLE_MAX_S = 1.0, 150.0


def settle() -> float:
    """Wait (bounded) until the previous benchmark's processes have gone and the 1-minute load average is
    below 1 on this 2-core machine: a benchmark started right after 16 streaming builds measured their tail."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < SETTLE_MAX_S and os.getloadavg()[0] >= SETTLE_LOAD:
        time.sleep(2.0)
    return round(time.monotonic() - t0, 1)


def hashing_figures(text: str) -> list[dict]:
    """The issue's two hashing targets, read from bench_hashing.py's lines `first run: … GB/s` and `ratio …%`."""
    out = []
    rate = re.search(r"first run:\s+[\d.]+ s\s+([\d.]+) GB/s", text)
    ceiling = re.search(r"ceiling[^:]*:.*?([\d.]+) GB/s", text)
    if rate:
        detail = f"in-memory sha256 ceiling at that moment: {ceiling.group(1)} GB/s" if ceiling else ""
        out.append(
            {
                "name": "first run over page-cached files",
                "value": float(rate.group(1)),
                "unit": "GB/s",
                "target": "≥ 2.5 GB/s",
                "pass": float(rate.group(1)) >= 2.5,
                "detail": detail,
            }
        )
    ratio = re.search(r"ratio\s+([\d.]+)% of the first run", text)
    if ratio:
        out.append(
            {
                "name": "re-run over unchanged files / first run",
                "value": float(ratio.group(1)),
                "unit": "%",
                "target": "≤ 5 %",
                "pass": float(ratio.group(1)) <= 5.0,
            }
        )
    return out


def run_one(name: str, extra: list[str], quick: bool, out_dir: Path) -> dict:
    out = out_dir / f"{name}.json"
    cmd = [sys.executable, str(HERE / f"{name}.py"), *extra]
    if name == "bench_hashing":  # its own interface: no --quick/--json
        cmd += ["--gb", "0.2"] if quick else []
    else:
        cmd += [*(["--quick"] if quick else []), "--json", str(out)]
    print(f"\n### {name}: {' '.join(cmd[1:])}", flush=True)
    settled = settle()
    load0 = os.getloadavg()[0]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    took = time.perf_counter() - t0
    print(proc.stdout, flush=True)
    base = {
        "bench": name,
        "seconds": round(took, 1),
        "loadavg": [round(load0, 2), round(os.getloadavg()[0], 2)],
        "settled_s": settled,
        "returncode": proc.returncode,
    }
    if name == "bench_hashing":  # its own output format: keep it verbatim and read the two targeted figures from it
        lines = [x for x in proc.stdout.splitlines() if x.strip()]
        return {
            **base,
            "title": "Hashing throughput (trtls.checkpoint.hashing)",
            "figures": hashing_figures(proc.stdout),
            "verbatim": lines[-20:],
            "method": "see benchmarks/bench_hashing.py (its own output, verbatim)",
        }
    if proc.returncode != 0 or not out.is_file():
        return {**base, "title": name, "figures": [], "error": proc.stdout[-3000:]}
    return {**base, **json.loads(out.read_text())}


def verdict(f: dict) -> str:
    return "" if f.get("pass") is None else ("**PASS**" if f["pass"] else "**MISS**")


def value(f: dict) -> str:
    v = f["value"]
    if v is None:
        return "n/a"
    if isinstance(v, float):
        v = f"{v:,.3f}".rstrip("0").rstrip(".") if abs(v) < 1000 else f"{v:,.0f}"
    elif isinstance(v, int):
        v = f"{v:,}"
    return f"{v} {f.get('unit') or ''}".strip()


def render(results: list[dict], meta: dict, quick: bool, cmdline: str) -> str:
    m, v = meta["machine"], meta["versions"]
    out = [
        "# trtls performance",
        "",
        f"Measured {meta['date']} by `{cmdline}` (generated file: re-run it rather than editing by hand)."
        + (" **Quick mode: smoke-run sample sizes, not a measurement.**" if quick else ""),
        "",
        "## Machine and versions",
        "",
        "| | |",
        "|---|---|",
        f"| CPU | {m['cpu']}, {m['cores']} cores (no GPU: TensorRT-RTX builds ahead of time on the CPU) |",
        f"| RAM | {m['ram']} |",
        f"| OS | {m['os']} |",
        *[f"| {k} | {val} |" for k, val in v.items()],
        "",
        "Other processes shared this machine while the suite ran (the 1-minute load average at the start/end of each",
        "benchmark is listed below). Wall-clock figures include that contention; ratios and percentiles are used so "
        "the",
        "figures stay comparable, and the monitor-overhead benchmark adds a CPU-time ratio that contention does not "
        "move.",
        "",
        "## Summary",
        "",
        "| benchmark | figure | value | target | result |",
        "|---|---|---|---|---|",
    ]
    for r in results:
        for f in r.get("figures", []):
            if f.get("target"):
                out.append(f"| {r['title']} | {f['name']} | {value(f)} | {f['target']} | {verdict(f)} |")
    for r in results:
        waited = f" (after waiting {r['settled_s']} s for the machine to settle)" if r.get("settled_s") else ""
        out += [
            "",
            f"## {r['title']}",
            "",
            f"`python benchmarks/{r['bench']}.py` — {r['seconds']} s, load average {r['loadavg'][0]} → "
            f"{r['loadavg'][1]}{waited}.",
            "",
        ]
        if r.get("method"):
            out += [f"Method: {r['method']}.", ""]
        if r.get("error"):
            out += ["**The benchmark failed:**", "", "```", r["error"], "```"]
            continue
        if r.get("verbatim"):
            out += ["```", *r["verbatim"], "```"]
        if r.get("figures"):
            out += ["| figure | value | target | result | detail |", "|---|---|---|---|---|"]
            for f in r["figures"]:
                out.append(
                    f"| {f['name']} | {value(f)} | {f.get('target') or '—'} | {verdict(f) or '—'} | "
                    f"{f.get('detail') or ''} |"
                )
        if r.get("table"):
            out += [
                "",
                "| source | runs | cancelled | built first | request→return p50/p99 ms | seen→return p50/p99/max ms | "
                "cleanup p50/p99/max ms |",
                "|---|---|---|---|---|---|---|",
            ]
            for t in r["table"]:
                a, b, c = t["cancelLatencyMs"], t["cancelReturnAfterSeenMs"], t["cleanupLatencyMs"]
                g = lambda d, ks: " / ".join(f"{d[k]:g}" for k in ks) if d.get("n") else "n/a"  # noqa: E731
                out.append(
                    f"| {t['source']} | {t['runs']} | {t['cancelled']} | {t['builtBeforeCancel']} | "
                    f"{g(a, ('p50', 'p99'))} | "
                    f"{g(b, ('p50', 'p99', 'max'))} (n={b.get('n', 0)}) | {g(c, ('p50', 'p99', 'max'))} |"
                )
        for note in r.get("notes", []):
            out.append(f"\n- {note}")
    findings = HERE / "findings.md"
    if findings.is_file():  # where the time goes, for figures far from their target (written by hand after a run)
        out += ["", "## Where the time goes (figures far from their target)", "", findings.read_text().rstrip()]
    out += [
        "",
        "## How to reproduce",
        "",
        "```sh",
        "source .venv/bin/activate",
        "python samples/quickstart/make_models.py      # the ONNX models the builds use (same bytes every run)",
        "python benchmarks/run_all.py                  # all benchmarks → docs/performance.md",
        "python benchmarks/bench_cancel_latency.py     # or any one alone: it prints its figures (--json FILE, "
        "--quick)",
        "```",
        "",
        "Benchmarks are not tests: nothing here runs under pytest, and no test asserts a duration.",
        "",
    ]
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", nargs="+", help="run only these benchmarks (names without .py)")
    ap.add_argument("--output", type=Path, default=ROOT / "docs" / "performance.md")
    args = ap.parse_args()
    meta = {
        "machine": machine(),
        "versions": versions(),
        "date": dt.datetime.now().strftime("%Y-%m-%d %H:%M %Z").strip(),
    }
    results = []
    with tempfile.TemporaryDirectory(prefix="trtls-bench-results-") as tmp:
        for name, extra in BENCHES:
            if args.only and name not in args.only:
                continue
            results.append(run_one(name, extra, args.quick, Path(tmp)))
    cmdline = "python benchmarks/run_all.py" + (" --quick" if args.quick else "")
    args.output.write_text(render(results, meta, args.quick, cmdline))
    print(f"\nwrote {args.output}")


if __name__ == "__main__":
    main()
