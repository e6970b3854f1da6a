"""`trtls store stats` (hits, misses by reason, time saved, size, per engine and per day: ccache -s) and `trtls store
why A B` (what differs between two builds' or keys' engine keys, and whether each is in the store: Bazel's explain).

The counts are `trtls.store.stats.stats`, the differences `trtls.store.diff.key_changes`, what A and B name
cli/store_why_sides.py (`resolve_sides`); this module opens the store and prints. Exit codes: 0 shown or explained (a
store with no statistics yet too), 2 bad input (TRT341: a build id or key that names nothing, TRT330: no store)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from trtls.cli.common import find_recipe, load_or_report, report_error
from trtls.cli.exits import EXIT_BAD_INPUT, EXIT_OK
from trtls.core.display import human_bytes, human_seconds
from trtls.core.terminal_text import terminal_safe

# -- stats ---------------------------------------------------------------------------------------------------------


def cmd_stats(args: argparse.Namespace) -> int:
    from trtls.store.entries import Store
    from trtls.store.stats import stats

    opened = _open_config(args.recipe)
    if opened is None:
        return EXIT_BAD_INPUT
    loaded, config = opened
    if config is None:
        why = "for this recipe" if loaded is not None else "(TRTLS_STORE=off)"
        report_error("TRT330", f"the engine store is off {why}", str(loaded.path) if loaded is not None else ".")
        return EXIT_BAD_INPUT
    counts = stats(Store.from_config(config), days=args.days)
    if args.json:
        print(json.dumps(counts))
        return EXIT_OK
    print("\n".join(stats_lines(counts)))
    return EXIT_OK


def stats_lines(c: dict[str, Any]) -> list[str]:
    """`trtls store stats` as text, in ccache -s's shape: one figure a line, the breakdowns indented under it."""
    hits, misses = c["hits"], c["misses"]
    lines = [
        f"{'store':<34}{c['store']} ({c['mode']})",
        f"{'entries':<34}{c['entries']} ({human_bytes(c['size'])})"
        + (f", {c['refusedEntries']} refused (damaged or not trusted)" if c["refusedEntries"] else ""),
        *_dedup(c),
        f"{'counted since':<34}{c['since']} (the last {c['days']} days, UTC)",
    ]
    if hits["total"] + misses["total"] == 0:
        lines.append("no hits or misses recorded in this store yet (every build that uses it records one)")
        return lines + _skipped(c)
    lines += [
        f"{'hits':<34}{hits['total']:>6}  {_rate(c['hitRate'])}",
        f"{'  restored (copied to the output)':<34}{hits['restored']:>6}",
        f"{'  kept (the output held it)':<34}{hits['kept']:>6}",
        f"{'  fast path (recipe not re-read)':<34}{hits['fast']:>6}",
        f"{'  farm node (from the remote)':<34}{hits['node']:>6}",
        f"{'misses':<34}{misses['total']:>6}",
        *(f"  {reason:<32}{n:>6}" for reason, n in misses["byReason"].items()),
        f"{'time saved':<34}{human_seconds(c['timeSavedS']):>6}  (the reused engines' own build times)",
        "",
        f"{'per engine':<34}{'hits':>6}{'misses':>8}{'hit rate':>10}  time saved",
        *(_row(name, row) for name, row in c["perEngine"].items()),
        "",
        f"{'per day (UTC)':<34}{'hits':>6}{'misses':>8}{'hit rate':>10}  time saved",
        *(_row(day, row) for day, row in c["perDay"].items()),
    ]
    return lines + _skipped(c)


def _dedup(c: dict[str, Any]) -> list[str]:
    """How many distinct engines the entries hold, and how many entries share one (docs/store.md, Content dedup)."""
    d = c.get("dedup") or {}
    if not c["entries"]:
        return []
    shared = (
        f"{d['sharedEntries']} entries share one ({human_bytes(d['duplicateSize'])} in copies beyond the first)"
        if d.get("sharedEntries")
        else "no two entries hold the same engine"
    )
    return [f"{'distinct engines':<34}{d.get('distinctEngines', 0)} ({shared})"]


def _row(name: str, row: dict[str, Any]) -> str:
    shown = terminal_safe(name, keep_newlines=False)
    saved = human_seconds(row["timeSavedS"])
    return f"  {shown:<32}{row['hits']:>6}{row['misses']:>8}{_rate(row['hitRate']):>10}  {saved}"


def _rate(rate: float | None) -> str:
    return "–" if rate is None else f"{rate * 100:.1f} %"


def _skipped(c: dict[str, Any]) -> list[str]:
    n = c["skippedLines"]
    return [f"{n} line(s) of {c['store']}/stats skipped: not statistics trtls writes"] if n else []


def _days(text: str) -> int:
    from trtls.store.stats import KEEP_DAYS

    if not text.isdigit() or not 1 <= int(text) <= KEEP_DAYS:
        raise argparse.ArgumentTypeError(f"expected a number of days from 1 to {KEEP_DAYS}, got {text!r}")
    return int(text)


# -- why -----------------------------------------------------------------------------------------------------------


def cmd_why(args: argparse.Namespace) -> int:
    from trtls.cli.store_why_sides import Unresolved, resolve_sides  # only `why` loads it, when it runs

    opened = _open_for_why(args.recipe)
    if opened is None:
        return EXIT_BAD_INPUT
    loaded, store = opened
    where = str(loaded.path) if loaded is not None else str(store.root if store is not None else ".")
    try:
        sides = resolve_sides(args.a, args.b, loaded, store, args.engine, where)
    except Unresolved as exc:
        report_error("TRT341", terminal_safe(str(exc)), terminal_safe(exc.where))
        return EXIT_BAD_INPUT
    from trtls.store.diff import key_changes

    a, b = sides
    forward, backward = key_changes(a.parts, b.parts), key_changes(b.parts, a.parts)
    if args.json:
        out = {"a": a.as_json(), "b": b.as_json(), "sameKey": a.key == b.key, "changes": forward, "reverse": backward}
        print(json.dumps(out, default=str))
        return EXIT_OK
    print(terminal_safe(f"A  {a.label()}", keep_newlines=False))
    print(terminal_safe(f"B  {b.label()}", keep_newlines=False))
    if a.key == b.key:
        held = " (the store holds its engine: a build of either restores it)" if a.in_store else ""
        print(f"same key {a.key[:12]}: nothing differs{held}")
        return EXIT_OK
    if not forward:
        print("the keys differ in a part trtls does not name (a key of another trtls version)")
        return EXIT_OK
    for title, lines in (("A → B", forward), ("B → A", backward)):
        print(f"{title}:")
        for line in lines:
            print(terminal_safe(f"  {line}", keep_newlines=False))
    return EXIT_OK


def _open_config(recipe: str | None) -> tuple[Any, Any] | None:
    """(the recipe or None, its store's config or None when the store is off) — a recipe named or in the folder,
    else the default store (TRTLS_STORE, the per-user folder) — as `trtls store ls` opens it; None: the recipe has
    errors (said)."""
    from trtls.store.config import store_config

    if recipe is None and not find_recipe(None).is_file():
        return None, store_config(None, Path.cwd())
    loaded = load_or_report(recipe)
    if loaded is None:
        return None
    return loaded, store_config(loaded.recipe.store, loaded.base_dir)


def _open_for_why(recipe: str | None) -> tuple[Any, Any] | None:
    """(the recipe or None, its store read-only or None): `why` explains builds of a recipe without a store too."""
    from trtls.store.entries import Store

    opened = _open_config(recipe)
    if opened is None:
        return None
    loaded, config = opened
    return loaded, (Store.read_only(config) if config is not None else None)


# -- the parsers ---------------------------------------------------------------------------------------------------


def register_actions(actions: Any) -> None:
    """Add `stats` and `why` to `trtls store`'s actions."""
    recipe_help = "trtls.toml or its folder whose store to use (default: ., else the per-user store)"
    st = actions.add_parser(
        "stats",
        help="hits, misses by reason, time saved, size, per engine and per day (ccache -s)",
        epilog="exit codes: 0 shown (a store with nothing recorded yet too), 2 bad input",
    )
    st.add_argument("recipe", nargs="?", help=recipe_help)
    st.add_argument("--json", action="store_true", help="one JSON object")
    st.add_argument("--days", type=_days, default=90, metavar="N", help="count the last N days (1-90, default 90)")
    st.set_defaults(func=cmd_stats)
    why = actions.add_parser(
        "why",
        help="what differs between two builds' or keys' engine keys, and whether each is in the store",
        epilog="A and B: a build id (a known-good build or a run of the recipe), an engine key or a unique prefix of "
        "8+ hex digits, or `recipe` (the key the recipe computes now). "
        "Exit codes: 0 explained, 2 bad input (TRT341: names nothing)",
    )
    why.add_argument("a", metavar="A", help="a build id, an engine key (or a prefix of 8+ hex digits), or `recipe`")
    why.add_argument("b", metavar="B", help="the same, to compare A with")
    why.add_argument("recipe", nargs="?", help=recipe_help)
    why.add_argument("--engine", help="the engine table `recipe` is keyed for (default: the other side's)")
    why.add_argument("--json", action="store_true", help="one JSON object")
    why.set_defaults(func=cmd_why)
