"""`.trtls/` upkeep from the terminal: orphan recovery before `trtls build`, and `trtls gc` (retention).

`trtls build` first completes the evidence of builds whose supervisor died (a SIGKILLed CLI, a crashed language
server): the same recovery the language server runs when it opens a folder (builds/supervisor/orphans.py).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trtls.core.display import human_bytes
from trtls.core.terminal_text import terminal_safe

if TYPE_CHECKING:
    from trtls.builds.supervisor.orphans import RecoveredBuild


def recover_before_build(recipe_path: Path, quiet: bool = False) -> list[RecoveredBuild]:
    """Recover orphaned builds of this recipe's folder; one line each on stderr (JSON lines with `--json`)."""
    from trtls.builds.supervisor.orphans import recover_orphans

    trtls_dir = recipe_path.parent / ".trtls"
    if not (trtls_dir / "runs").is_dir():
        return []
    found = recover_orphans(trtls_dir)
    for r in found:
        if quiet:
            print(json.dumps({"type": "orphan_recovered", **r.record()}, default=str), file=sys.stderr)
        else:
            print(f"trtls: recovered interrupted build {r.build_id} ({r.engine}): {r.message}", file=sys.stderr)
    return found


def register(sub: Any) -> None:
    g = sub.add_parser(
        "gc",
        help="remove old build evidence from .trtls/ (keeps what a record still points to)",
        epilog="exit codes: 0 done (or nothing to do), 2 bad input or refused (a symlinked .trtls or runs)",
    )
    g.add_argument("folder", nargs="?", default=".", help="the recipe's folder or its trtls.toml (default: .)")
    g.add_argument("--dry-run", action="store_true", help="say what would be removed; remove nothing")
    g.add_argument("--json", action="store_true", help="print the result as one JSON object")
    g.add_argument(
        "--keep-runs", type=_positive(int), metavar="N", help="keep the N newest runs (default: the recipe's)"
    )
    g.add_argument("--max-age-days", type=_positive(float), metavar="DAYS", help="remove runs older than this")
    g.add_argument(
        "--max-size-mb", type=_positive(float), metavar="MB", help="remove the oldest runs beyond this total size"
    )
    g.set_defaults(func=cmd_gc)


def _positive(kind: type) -> Any:
    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if not value > 0:  # NaN compares false with everything: as a bound it removed runs it should not
            raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
        return value

    return parse


def cmd_gc(args: argparse.Namespace) -> int:
    from trtls.builds.supervisor.retention import collect, policy_for

    folder = Path(args.folder)
    if folder.is_file():
        folder = folder.parent
    if not folder.is_dir():
        print(f"trtls gc: {folder}: not a folder", file=sys.stderr)
        return 2
    policy = policy_for(folder, args.keep_runs, args.max_age_days, args.max_size_mb)
    result = collect(folder / ".trtls", policy, dry_run=args.dry_run)
    if (folder / "trtls.toml").is_file():  # what killed restores left beside the engine outputs (issue 32)
        from trtls.builds.supervisor.retention import clean_engine_temps

        result["engineTemps"] = clean_engine_temps(folder, dry_run=args.dry_run)
    refused = result.get("refused")
    if args.json:
        print(json.dumps(result, indent=2, default=str))
        return 2 if refused else 0
    if refused:  # a symlinked .trtls or runs (TRT118), an unwritable lock: nothing removed, and said so
        print(terminal_safe(f"{refused['path']}: {refused['code']} {refused['message']}"), file=sys.stderr)
        return 2
    verb = "would remove" if args.dry_run else "removed"
    freed = human_bytes(result["freedBytes"])
    print(f"trtls gc: {verb} {len(result['removed'])} run(s), {freed}; kept {len(result['kept'])}")
    for r in result["removed"]:
        print(f"  {verb}: {r['buildId']} ({r['reason']})")
    for r in result["kept"]:
        if r.get("pinned"):
            print(f"  kept: {r['buildId']} ({r['pinned']})")
    for path in result.get("engineTemps", {}).get("removed", []):
        print(terminal_safe(f"  {verb}: {path} (left by a killed restore or build)"))
    if result["historyConfigsDropped"]:
        print(f"  history.json: {verb} {result['historyConfigsDropped']} old build config(s)")
    return 0
