"""`trtls accept [RECIPE] --engine NAME [--scenarios LIST] [--waive W] [--format text|json|junit] [--output FILE]`

Exit 0 only when every criterion the chosen scenarios set out to measure passed, or was not measured
(`not_checked`) and waived by name with --waive; 1 otherwise; 2 for bad input (recipe, engine, scenario
names, waivers). The folder of every failed scenario is kept and named in the report (--keep keeps all).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from trtls.cli.exits import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK
from trtls.cli.usage import output_file, recipe_argument


def register(sub: Any) -> None:
    a = sub.add_parser(
        "accept",
        help="stuck-build acceptance test: fault-injection scenarios with real builds, eight criteria each",
        epilog="exit codes: 0 every criterion measured passed (or was not_checked and waived), 1 a criterion failed "
        "or was not checked, 2 bad input (recipe, engine, scenarios, waivers)",
    )
    recipe_argument(a)
    a.add_argument("--engine", help="engine table to exercise (required unless --list)")
    a.add_argument(
        "--scenarios", default="fast", help="fast (default), all, or a comma-separated list of scenario names"
    )
    a.add_argument(
        "--waive",
        action="append",
        default=[],
        metavar="WHAT",
        help="accept a criterion that could not be measured here: a criterion number (6), a scenario "
        "(deep_tactics) or scenario:criterion (disk_full:6); repeatable. Failures are never waived",
    )
    a.add_argument("--format", choices=("text", "json", "junit"), default="text", help="report format (default: text)")
    a.add_argument("--output", "-o", type=output_file, help="write the report here (default: stdout)")
    a.add_argument("--scratch", help="parent folder for the scratch copies (default: the system temp folder)")
    a.add_argument("--keep", action="store_true", help="keep every scenario's folder (failed ones are always kept)")
    a.add_argument("--list", action="store_true", help="list the scenarios, what each proves and does not, then exit")
    a.set_defaults(func=cmd_accept)


def check_waivers(waivers: list[str]) -> None:
    from trtls.accept.criteria import TITLES
    from trtls.accept.scenarios import BY_NAME

    for w in waivers:
        scenario, _, crit = w.partition(":")
        ok = (w in TITLES) or (scenario in BY_NAME and (not crit or crit in TITLES))
        if not ok:
            raise ValueError(f"--waive {w!r}: not a criterion (1-8), a scenario, or scenario:criterion")


def run_accept(
    recipe: Path,
    engine: str,
    scenario_spec: str,
    scratch: Path | None = None,
    keep: bool = False,
    log=None,
    waivers: list[str] | None = None,
) -> tuple[dict[str, Any], list]:
    from trtls.accept import runner
    from trtls.accept.criteria import Observation
    from trtls.accept.report import build_report
    from trtls.accept.scenarios import BY_NAME, select

    log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
    waivers = waivers or []
    chosen = select(scenario_spec)
    ctx = runner.prepare(recipe, engine, scratch, log)
    observations: list[Observation] = []
    for sc in chosen:
        log(f"scenario {sc.name}…")
        t0 = time.monotonic()
        try:
            obs = sc.run(ctx)
        except Exception as exc:
            obs = Observation(sc.name, error=f"{type(exc).__name__}: {exc}")
        obs.extra["durationS"] = round(time.monotonic() - t0, 2)
        folder = ctx.scratch / sc.name
        obs.evidence_dir = str(folder) if folder.exists() else None
        observations.append(obs)
    meta = {"recipe": str(ctx.source_recipe), "engine": engine, "scenarioSpec": scenario_spec}
    report = build_report(observations, BY_NAME, meta, waivers)
    prune_folders(report, ctx.scratch, keep, log)
    return report, observations


def prune_folders(report: dict[str, Any], scratch: Path, keep: bool, log) -> None:
    """Evidence of what failed stays (the report names the folders); what passed goes unless --keep. Removed
    through the door: only inside the scratch folder this run made (`runner.prepare`), never through a link."""
    failed = set(report["failedScenarios"])
    for s in report["scenarios"]:
        if not keep and s["scenario"] not in failed and s.get("evidenceFolder"):
            if _remove_scratch(scratch / Path(s["evidenceFolder"]).name, scratch, log):
                s["evidenceFolder"] = s["evidencePath"] = None
    report["keptFolders"] = {s["scenario"]: s["evidenceFolder"] for s in report["scenarios"] if s["evidenceFolder"]}
    if keep or failed:
        report["scratch"] = str(scratch)
        log(f"evidence kept in {scratch}" + (f" (failed: {', '.join(sorted(failed))})" if failed else ""))
    else:
        _remove_scratch(scratch, scratch.parent, log)
        report["scratch"] = None


def _remove_scratch(folder: Path, within: Path, log) -> bool:
    from trtls.fs import Kind, remove_tree

    try:
        remove_tree(folder, kind=Kind.scratch, within=within)
        return True
    except OSError as exc:
        log(f"{folder}: not removed ({exc.strerror or exc})")
        return False


def list_scenarios() -> str:
    from trtls.accept.criteria import TITLES
    from trtls.accept.scenarios import SCENARIOS

    out = []
    for s in SCENARIOS:
        out.append(f"{s.name}{' (fast)' if s.fast else ''} — {s.fault} fault: {s.how}")
        out.append(f"    proves: {s.proves}")
        out.append(f"    does not prove: {s.does_not_prove}")
        out.append(f"    measures: {', '.join(f'{c} {TITLES[c]}' for c in s.criteria)}")
    return "\n".join(out) + "\n"


def cmd_accept(args: argparse.Namespace) -> int:
    from trtls.accept.report import render
    from trtls.accept.scenarios import select
    from trtls.accept.scratch import AcceptError

    if args.list:
        sys.stdout.write(list_scenarios())
        return EXIT_OK
    if not args.engine:
        print("trtls accept: --engine NAME is required", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        select(args.scenarios)
        check_waivers(args.waive)
    except ValueError as exc:
        print(f"trtls accept: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    p = Path(args.recipe or ".")
    recipe = p / "trtls.toml" if p.is_dir() else p
    if not recipe.is_file():
        print(f"{recipe}: TRT104 recipe file not found", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        report, _ = run_accept(
            recipe,
            args.engine,
            args.scenarios,
            Path(args.scratch) if args.scratch else None,
            args.keep,
            waivers=args.waive,
        )
    except AcceptError as exc:
        print(f"trtls accept: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    text = render(report, args.format)
    if args.output:
        from trtls.cli.output import write_output

        fmt = {"json": "json", "junit": "xml"}.get(args.format, "text")
        refused = write_output(args.output, text, fmt=fmt, recipes=(recipe,))
        if refused is not None:
            return refused
    else:
        sys.stdout.write(text)
    return EXIT_OK if report["passed"] else EXIT_FAILED
