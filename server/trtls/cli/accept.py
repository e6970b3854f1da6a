"""`trtls accept [RECIPE] --engine NAME [--scenarios LIST] [--format text|json|junit] [--output FILE]`

Exit 0 when every criterion of every scenario passes (n/a counts as not failing), 1 otherwise,
2 for bad input (recipe, engine, scenario names).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path
from typing import Any

EXIT_PASS, EXIT_FAIL, EXIT_BAD_INPUT = 0, 1, 2


def register(sub: Any) -> None:
    a = sub.add_parser(
        "accept",
        help="stuck-build acceptance test: fault-injection scenarios with real builds, eight criteria each",
        epilog="exit codes: 0 every criterion passed, 1 a criterion failed, 2 bad input (recipe, engine, scenarios)",
    )
    a.add_argument("recipe", nargs="?", help="trtls.toml or its folder (default: .)")
    a.add_argument("--engine", help="engine table to exercise (required unless --list)")
    a.add_argument(
        "--scenarios", default="fast", help="fast (default), all, or a comma-separated list of scenario names"
    )
    a.add_argument("--format", choices=("text", "json", "junit"), default="text", help="report format (default: text)")
    a.add_argument("--output", "-o", help="write the report here (default: stdout)")
    a.add_argument("--scratch", help="parent folder for the scratch copies (default: the system temp folder)")
    a.add_argument("--keep", action="store_true", help="keep the scratch folder (evidence of every run) afterwards")
    a.add_argument("--list", action="store_true", help="list the scenarios and what each proves, then exit")
    a.set_defaults(func=cmd_accept)


def run_accept(
    recipe: Path, engine: str, scenario_spec: str, scratch: Path | None = None, keep: bool = False, log=None
) -> tuple[dict[str, Any], list]:
    from trtls.accept import runner
    from trtls.accept.criteria import Observation
    from trtls.accept.report import build_report
    from trtls.accept.scenarios import SCENARIOS, select

    log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
    chosen = select(scenario_spec)
    ctx = runner.prepare(recipe, engine, scratch, log)
    observations: list[Observation] = []
    try:
        for sc in chosen:
            log(f"scenario {sc.name}…")
            t0 = time.monotonic()
            try:
                obs = sc.run(ctx)
            except Exception as exc:
                obs = Observation(sc.name, error=f"{type(exc).__name__}: {exc}")
            obs.extra["durationS"] = round(time.monotonic() - t0, 2)
            observations.append(obs)
    finally:
        if keep:
            log(f"scratch kept: {ctx.scratch}")
        else:
            shutil.rmtree(ctx.scratch, ignore_errors=True)
    report = build_report(
        observations,
        {s.name: s.proves for s in SCENARIOS},
        {
            "recipe": str(ctx.source_recipe),
            "engine": engine,
            "scenarioSpec": scenario_spec,
            "scratch": str(ctx.scratch) if keep else None,
        },
    )
    return report, observations


def cmd_accept(args: argparse.Namespace) -> int:
    from trtls.accept.report import render
    from trtls.accept.runner import AcceptError
    from trtls.accept.scenarios import SCENARIOS, select

    if args.list:
        for s in SCENARIOS:
            print(f"{s.name:18} {'fast' if s.fast else '    '}  {s.proves}")
        return EXIT_PASS
    if not args.engine:
        print("trtls accept: --engine NAME is required", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        select(args.scenarios)
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
            recipe, args.engine, args.scenarios, Path(args.scratch) if args.scratch else None, args.keep
        )
    except AcceptError as exc:
        print(f"trtls accept: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    text = render(report, args.format)
    if args.output:
        from trtls.core.atomic import atomic_write_text

        atomic_write_text(args.output, text)
    else:
        sys.stdout.write(text)
    return EXIT_PASS if report["passed"] else EXIT_FAIL
