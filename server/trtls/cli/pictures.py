"""`trtls trace` (a build as a Chrome trace / Perfetto JSON) and `trtls report` (a build or a route as one
self-contained HTML page), registered by trtls.cli.main. Both only read evidence already on disk.

Exit codes: 0 written, 2 bad input (no such build or route, unreadable evidence; the message names the path).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from trtls.cli.exits import EXIT_BAD_INPUT, EXIT_OK
from trtls.cli.usage import output_file

EPILOG = "exit codes: 0 written, 2 bad input (no such build or route, unreadable evidence)"
TARGET_HELP = "a build id from .trtls/runs/, `latest` (default), or a run folder"
RECIPE_HELP = "trtls.toml or its folder, whose .trtls/ holds the evidence (default: .)"


def register(subparsers: Any) -> None:
    t = subparsers.add_parser(
        "trace",
        help="write a build as a Chrome trace / Perfetto JSON (open in ui.perfetto.dev or chrome://tracing)",
        description="Phases as nested slices, quiet gaps, cancel request/seen/return/cleanup as instant events, "
        "steps as counters.",
        epilog=EPILOG,
    )
    t.add_argument("build", nargs="?", default="latest", help=TARGET_HELP)
    t.add_argument("--recipe", default=".", help=RECIPE_HELP)
    t.add_argument(
        "-o", "--output", type=output_file, help="write here (default: <run folder>/trace.json); `-` for stdout"
    )
    t.set_defaults(func=cmd_trace)

    r = subparsers.add_parser(
        "report",
        help="write a build or a route's gates as one self-contained HTML page",
        description="A build: phase timeline with quiet gaps and usual durations, build time over time, cancel "
        "latency, artifacts. A route (--route): the five gates with every check, its status and figures. "
        "The page loads nothing from the network.",
        epilog=EPILOG,
    )
    r.add_argument("build", nargs="?", help=f"{TARGET_HELP}; with --route: the recipe, as `trtls gates` takes it")
    r.add_argument(
        "--route", help="report this route's last gates run instead of a build: trtls report [RECIPE] --route NAME"
    )
    r.add_argument("--reduction", help="report a reduction or divergence search (its id, or latest): docs/triage.md")
    r.add_argument("--recipe", help=RECIPE_HELP)
    r.add_argument(
        "-o", "--output", type=output_file, help="write here (default: <run folder>/report.html, or the route's folder)"
    )
    r.set_defaults(func=cmd_report)


def _write(text: str, output: str | None, default: Path, fmt: str, recipe: str) -> int | Path | None:
    """Write the picture: to stdout (`-o -`: None), to `-o FILE` (judged like every `-o`: cli.output), or to its
    default place beside the evidence. The path written, or the exit code of a refusal (one located line)."""
    from trtls.cli.common import find_recipe
    from trtls.cli.output import write_output

    if output == "-":
        sys.stdout.write(text)
        return None
    recipe_path = find_recipe(recipe)
    target = Path(output) if output else default
    refused = write_output(target, text, fmt=fmt, recipes=(recipe_path,), judged=output is not None)
    return refused if refused is not None else target


def cmd_trace(args: argparse.Namespace) -> int:
    from trtls.report.evidence import EvidenceError, find_run, load_build
    from trtls.report.trace import chrome_trace

    try:
        ev = load_build(find_run(args.build, Path(args.recipe)))
    except EvidenceError as exc:
        print(f"{exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    trace = json.dumps(chrome_trace(ev), indent=None) + "\n"
    where = _write(trace, args.output, ev.run_dir / "trace.json", "json", args.recipe)
    if isinstance(where, int):
        return where
    if where is not None:
        print(f"{where}  (open in ui.perfetto.dev or chrome://tracing)")
    return EXIT_OK


def report_target(args: argparse.Namespace) -> tuple[str, str] | str:
    """(build, recipe) of `trtls report`, or what is wrong. A route's report takes the one dialect of every route
    command, `[RECIPE] --route NAME` (cli.route_dialect): the word is the recipe; the old `--route NAME --recipe R`
    still works, with a note on stderr."""
    if args.route is None:
        return args.build or "latest", args.recipe or "."
    if args.build is not None and args.recipe is not None:
        return (
            f"trtls report: two recipes given: {args.build} and --recipe {args.recipe} "
            "(trtls report RECIPE --route NAME)"
        )
    if args.recipe is not None:
        where = "" if args.recipe == "." else f"{args.recipe} "
        print(
            f"trtls report: note: `report --route NAME --recipe R` is deprecated; write "
            f"`trtls report {where}--route {args.route}`",
            file=sys.stderr,
        )
    return "latest", args.build or args.recipe or "."


def cmd_report(args: argparse.Namespace) -> int:
    from trtls.report.evidence import EvidenceError, find_run, load_build

    target = report_target(args)
    if isinstance(target, str):
        print(target, file=sys.stderr)
        return EXIT_BAD_INPUT
    args.build, args.recipe = target
    try:
        if args.reduction is not None:  # `--reduction ""` is no reduction, never the latest build
            from trtls.report.reduction_page import find_reduction, reduction_report

            folder = find_reduction(Path(args.recipe), args.reduction)
            text, default = reduction_report(folder), folder / "report.html"
        elif args.route is not None:
            from trtls.report.route_page import load_route, route_report, route_summary_path

            summary = load_route(Path(args.recipe), args.route)
            text, default = (
                route_report(summary),
                route_summary_path(Path(args.recipe), args.route).with_name("report.html"),
            )
        else:
            from trtls.report.build_page import build_report

            ev = load_build(find_run(args.build, Path(args.recipe)))
            text, default = build_report(ev), ev.run_dir / "report.html"
    except EvidenceError as exc:
        print(f"{exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    where = _write(text, args.output, default, "html", args.recipe)
    if isinstance(where, int):
        return where
    if where is not None:
        print(where)
    return EXIT_OK
