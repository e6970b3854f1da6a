"""`trtls engines` (every successful build of an engine table) and `trtls rollback` (an earlier one restored)."""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from trtls.cli.common import load_or_report, report_error
from trtls.cli.exits import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK
from trtls.core.display import human_bytes
from trtls.core.terminal_text import terminal_safe


def cmd_engines(args: argparse.Namespace) -> int:
    from trtls.store.known_good import KnownGood

    loaded = load_or_report(args.recipe)
    if loaded is None:
        return EXIT_BAD_INPUT
    if args.name not in loaded.recipe.engines:
        report_error("TRT107", f"no engine named {args.name}", str(loaded.path))
        return EXIT_BAD_INPUT
    records = KnownGood(loaded.path.parent / ".trtls", args.name).records()
    if args.json:
        print(json.dumps([{k: v for k, v in r.items() if k != "parts"} for r in records], default=str))
        return EXIT_OK
    if not records:
        print(f"{args.name}: no successful build recorded yet")
    for r in records:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(r.get("startedAt") or 0))
        changed = "; ".join(r.get("changes") or []) or "—"
        stored = "" if r.get("stored") else "  (not in the store)"
        size = human_bytes(r.get("size") or 0)
        print(f"{r.get('buildId')}  {when}  {str(r.get('key'))[:12]}  {size}  {changed}{stored}")
    return EXIT_OK


def cmd_rollback(args: argparse.Namespace) -> int:
    from trtls.builds.rollback import RollbackError, rollback

    loaded = load_or_report(args.recipe)
    if loaded is None:
        return EXIT_BAD_INPUT
    if args.name not in loaded.recipe.engines:
        report_error("TRT107", f"no engine named {args.name}", str(loaded.path))
        return EXIT_BAD_INPUT
    try:
        summary = rollback(loaded, args.name, args.to)
    except RollbackError as exc:
        report_error(exc.code, str(exc), str(loaded.path))
        return EXIT_FAILED
    print(terminal_safe(f"{args.name}: {summary['message']}"))
    if summary.get("evidenceError"):  # restored, but its record could not be written (TRT413)
        print(terminal_safe(f"  evidence: {summary['evidenceError']}"))
        return EXIT_FAILED
    print(terminal_safe(f"  evidence: {loaded.path.parent / '.trtls' / 'runs' / summary['buildId'] / 'summary.json'}"))
    return EXIT_OK


def register(sub: Any) -> None:
    e = sub.add_parser(
        "engines",
        help="every successful build of an engine: id, date, key, size, what changed",
        epilog="exit codes: 0 listed, 2 bad input",
    )
    e.add_argument("name", help="engine table")
    e.add_argument("recipe", nargs="?", help="trtls.toml or its folder (default: .)")
    e.add_argument("--json", action="store_true", help="one JSON array of the builds")
    e.set_defaults(func=cmd_engines)
    r = sub.add_parser(
        "rollback",
        help="restore an earlier known-good engine to the output, atomically",
        epilog="exit codes: 0 restored, 1 nothing to roll back to or the entry failed verification, 2 bad input",
    )
    r.add_argument("name", help="engine table")
    r.add_argument("recipe", nargs="?", help="trtls.toml or its folder (default: .)")
    r.add_argument(
        "--to",
        metavar="BUILD",
        help="the build whose engine to restore (default: the one before the engine now at the output)",
    )
    r.set_defaults(func=cmd_rollback)
