"""The engine store in the terminal: the lookup before `trtls build` starts a worker, and `trtls store ls|gc`,
`trtls engines NAME`, `trtls rollback NAME [--to BUILD]` (docs/store.md).

Exit codes: 0 done (listed, collected, restored), 1 nothing to roll back to or the entry failed verification,
2 bad input (recipe, engine, store folder)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from trtls.cli.common import load_or_report, report_error
from trtls.cli.exits import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK
from trtls.cli.usage import JsonErrors, emit_error
from trtls.core.display import human_bytes
from trtls.core.terminal_text import terminal_safe


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


async def avoid(
    loaded: Any, engine: str, args: argparse.Namespace, overrides: dict[str, Any]
) -> tuple[Any, int | None]:
    """Before a build: (the store use, None) → build, the caller calls `attach` on the build; (None, code) → done:
    the engine was reused (0) or the store is unusable (2)."""
    from trtls.builds import avoidance
    from trtls.store.entries import StoreUnusable

    try:
        use = avoidance.prepare(loaded, engine, overrides, no_store=bool(args.no_store), rebuild=bool(args.rebuild))
    except StoreUnusable as exc:
        file, line, col = avoidance.located_store_error(loaded, None, exc)
        print(f"{file}:{line}:{col}: {exc.code} error: {exc}", file=sys.stderr)
        emit_error(exc.code, str(exc), file=file, line=line, col=col)
        return None, EXIT_BAD_INPUT
    reused = await avoidance.reuse_or_lock(use, loaded, say=None if args.json else _say)
    for w in use.warnings:
        _say(f"warning: {w}")
    if reused is None:
        if use.changes and not args.json:
            _say(f"rebuilding {engine}: " + "; ".join(use.changes))
        return use, None
    return None, print_reused(engine, reused, loaded.path, bool(args.json))


def print_reused(engine: str, reused: dict[str, Any], recipe: Any, as_json: bool) -> int:
    """The reuse in the terminal; 1 when its evidence could not be written (TRT413, `evidenceError`): the engine is
    in place but no summary.json says so, and claiming one would point at a file that is not there."""
    error = reused.get("evidenceError")
    if as_json:
        print(json.dumps({"type": "summary", "summary": reused}, default=str), flush=True)
        return EXIT_FAILED if error else EXIT_OK
    print(terminal_safe(f"{engine}: {reused['message']}"))
    print(terminal_safe(f"  output: {reused['engineArtifact']['path']}"))
    if error:
        print(terminal_safe(f"  evidence: {error}"))
        return EXIT_FAILED
    print(terminal_safe(f"  evidence: {recipe.parent / '.trtls' / 'runs' / reused['buildId'] / 'summary.json'}"))
    return EXIT_OK


def fast_path(args: argparse.Namespace) -> int | None:
    """An unchanged `trtls build --engine NAME`: restored from the store before the recipe models are even imported
    (builds/reuse.py); None → the usual path."""
    from trtls.cli.common import find_recipe

    if not args.engine or args.all or args.matrix or args.cell or args.rebuild or args.no_store or args.cold:
        return None
    if args.optimization_level is not None:
        return None
    from trtls.builds.reuse import fast_hit
    from trtls.core.recipe_file import is_readable_recipe

    recipe = find_recipe(args.recipe).resolve()
    if not is_readable_recipe(recipe):
        return None  # a FIFO, a device, a huge file: the full path refuses it (TRT104, TRT125) without reading it
    reused = fast_hit(recipe, args.engine)
    if reused is None:
        return None
    return print_reused(args.engine, reused, recipe, bool(args.json))


def attach(use: Any, build: Any, quiet: bool) -> None:
    """Publish and record when the build ends — before any view prints the summary (first listener)."""
    from trtls.builds import avoidance

    avoidance.attach(use, build, None if quiet else lambda w: _say(f"warning: {w}"))


# -- subcommands -------------------------------------------------------------------------------------------------


def _open_store(recipe: str | None) -> tuple[Any, Any] | None:
    from pathlib import Path

    from trtls.cli.common import find_recipe
    from trtls.store.config import store_config
    from trtls.store.entries import Store

    if recipe is None and not find_recipe(None).is_file():  # no recipe here: the default store (TRTLS_STORE, XDG)
        config = store_config(None, Path.cwd())
        if config is None:
            report_error("TRT330", "the engine store is off (TRTLS_STORE=off)", ".")
            return None
        return None, Store.from_config(config)
    loaded = load_or_report(recipe)
    if loaded is None:
        return None
    config = store_config(loaded.recipe.store, loaded.base_dir)
    if config is None:
        report_error("TRT330", "the engine store is off for this recipe", str(loaded.path))
        return None
    return loaded, Store.from_config(config)


def cmd_store(args: argparse.Namespace) -> int:
    from trtls.builds.reuse import ago
    from trtls.store.config import parse_size

    opened = _open_store(args.recipe)
    if opened is None:
        return EXIT_BAD_INPUT
    _, store = opened
    if args.action == "gc":
        refusal = store.sweep_refusal()
        if refusal is not None:  # not a marked store, or no place for one: gc would remove someone's files
            print(terminal_safe(f"trtls store gc: {refusal}"), file=sys.stderr)
            return EXIT_BAD_INPUT
        bound = parse_size(args.max_size) if args.max_size else store.max_size
        evicted = store.evict(max_size=bound)
        left = store.clean_tmp()
        print(f"evicted {len(evicted)} entries ({human_bytes(sum(e.size for e in evicted))}); {left} leftovers removed")
        return EXIT_OK
    entries = sorted(store.entries(), key=lambda e: store.last_used(e.key), reverse=True)
    if args.json:
        print(
            json.dumps([{"key": e.key, "size": e.size, "lastUsed": store.last_used(e.key), **e.build} for e in entries])
        )
        return EXIT_OK
    print(f"{store.root} ({store.mode}): {len(entries)} entries, {human_bytes(sum(e.size for e in entries))}")
    for e in entries:
        b = e.build
        used = ago(store.last_used(e.key))
        print(f"  {e.key[:12]}  {human_bytes(e.size):>10}  {b.get('engine')}  build {b.get('buildId')}  used {used}")
    return EXIT_OK


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
    s = sub.add_parser(
        "store",
        help="the engine store: list entries (ls) or evict to the size bound (gc)",
        epilog="exit codes: 0 listed or collected, 2 bad input",
    )
    s.add_argument("action", choices=("ls", "gc"), help="ls: list the entries; gc: evict down to the bound")
    s.add_argument(
        "recipe", nargs="?", help="trtls.toml or its folder whose store to use (default: ., else the per-user store)"
    )
    s.add_argument("--max-size", help="gc: evict down to this size (e.g. 5GiB) instead of the store's bound")
    s.add_argument("--json", action="store_true", help="ls: one JSON array")
    s.set_defaults(func=cmd_store)
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


async def avoid_cells(loaded: Any, planned: list[Any], args: argparse.Namespace) -> tuple[list[Any], dict[str, Any]]:
    """A matrix's lookup (trtls.builds.avoidance.avoid_cells), said in the terminal: returns the cells still to build
    and each one's store use by cell key (see `attach_cells`)."""
    from trtls.builds import avoidance

    found = await avoidance.avoid_cells(loaded, planned, no_store=bool(args.no_store), rebuild=bool(args.rebuild))
    for w in found.warnings:
        _say(f"warning: {w}")
    for p, reused in found.reused:  # a script reading --json gets each restored cell's record, as for a build
        if args.json:
            record = {"type": "cell_summary", "cell": p.key, "buildId": reused.get("buildId"), "summary": reused}
            print(json.dumps(record, default=str), file=JsonErrors.out or sys.stdout, flush=True)
        else:
            print(f"{p.key}: {reused['message']}")
    return found.left, found.uses


def attach_cells(mb: Any, uses: dict[str, Any], quiet: bool) -> list[str]:
    """Publish each cell that builds, when it ends, and say what became of the cells of the same key (restored from
    its entry, or not built). Returns the list the cells that could not be restored are added to: a matrix with one
    of them did not produce every output it was asked for, whatever its built cells say (the caller's exit code)."""
    from trtls.builds import avoidance

    missing: list[str] = []

    def on_follower(cell: str, summary: dict[str, Any] | None, said: str) -> None:
        if summary is None:
            missing.append(cell)
        if not quiet:
            print(f"{cell}: {said}", file=sys.stdout if summary is not None else sys.stderr, flush=True)

    avoidance.attach_cells(mb, uses, on_follower)
    return missing
