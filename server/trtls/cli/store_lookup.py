"""The engine store before and after `trtls build`: the lookup before a worker starts (the fast path of an unchanged
build, the full lookup, a matrix's cells), what a reuse prints, and the publish when a build ends (docs/store.md)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from trtls.cli.exits import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK
from trtls.cli.usage import JsonErrors, emit_error
from trtls.core.terminal_text import terminal_safe


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


async def avoid(
    loaded: Any, engine: str, args: argparse.Namespace, overrides: dict[str, Any]
) -> tuple[Any, int | None]:
    """Before a build: (the store use, None) → build, the caller calls `attach` on the build; (None, code) → done:
    the engine was reused (0) or the store is unusable (2)."""
    from trtls.builds import avoidance
    from trtls.builds.pinned import PinUnavailable, unpinned_line
    from trtls.store.entries import StoreUnusable

    unpin = bool(getattr(args, "unpin", False))
    try:
        use = avoidance.prepare(
            loaded, engine, overrides, no_store=bool(args.no_store), rebuild=bool(args.rebuild), unpin=unpin
        )
    except StoreUnusable as exc:
        file, line, col = avoidance.located_store_error(loaded, None, exc)
        print(f"{file}:{line}:{col}: {exc.code} error: {exc}", file=sys.stderr)
        emit_error(exc.code, str(exc), file=file, line=line, col=col)
        return None, EXIT_BAD_INPUT
    if (said := unpinned_line(use)) is not None and not args.json:
        _say(f"{engine}: {said}")
    waiting = (lambda holder: _json_waiting(engine, holder)) if args.json else None
    try:
        reused = await avoidance.reuse_or_lock(use, loaded, say=None if args.json else _say, on_wait=waiting)
    except PinUnavailable as exc:  # nothing is built over a rollback: the user decides (--unpin)
        for w in use.all_warnings():
            _say(f"warning: {w}")
        print(terminal_safe(f"{loaded.path}: {exc.code} error: {exc}"), file=sys.stderr)
        emit_error(exc.code, str(exc), file=str(loaded.path))
        return None, EXIT_FAILED
    for w in use.all_warnings():
        _say(f"warning: {w}")
    if reused is None:
        if use.changes and not args.json:
            _say(f"rebuilding {engine}: " + "; ".join(use.changes))
        return use, None
    return None, print_reused(engine, reused, loaded.path, bool(args.json))


def _json_waiting(engine: str, holder: str) -> None:
    """`--json`: one line when this build starts waiting for another process's build of its key (the evidence's
    `store.waitedFor` says the same afterwards)."""
    pid, _, build_id = holder.partition(" ")
    record = {
        "type": "store_wait",
        "engine": engine,
        "holder": {"pid": int(pid) if pid.isdigit() else None, "buildId": build_id or None, "line": holder},
        "message": f"waiting for build {holder} of the same engine key (another process) — it will be reused",
    }
    print(json.dumps(record), file=JsonErrors.out or sys.stdout, flush=True)


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


_declined_by_entry = False  # the program's entry tried this command line and declined: the full path's call skips


def fast_path(args: argparse.Namespace, *, entry: bool = False) -> int | None:
    """An unchanged `trtls build --engine NAME`: restored from the store before the recipe models are even imported
    (builds/reuse.py); None → the usual path. `entry`: the call of `cli.entry`, whose decline the full path's own
    call then takes as its answer (once) instead of hashing the recipe and reading the memo a second time."""
    global _declined_by_entry
    if _declined_by_entry and not entry:
        _declined_by_entry = False
        return None
    done = _fast_path(args)
    _declined_by_entry = entry and done is None
    return done


def _fast_path(args: argparse.Namespace) -> int | None:
    from trtls.cli.common import find_recipe

    if not args.engine or args.all or args.matrix or args.cell or args.rebuild or args.no_store or args.cold:
        return None
    if getattr(args, "unpin", False):
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
    if not args.json:
        for w in reused["store"].get("warnings") or []:  # the store's own notes (a remote's miss, read-only)
            _say(f"warning: {w}")
    return print_reused(args.engine, reused, recipe, bool(args.json))


def attach(use: Any, build: Any, quiet: bool) -> None:
    """Publish and record when the build ends — before any view prints the summary (first listener)."""
    from trtls.builds import avoidance

    avoidance.attach(use, build, None if quiet else lambda w: _say(f"warning: {w}"))


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
