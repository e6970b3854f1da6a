"""The engine store in the terminal: the lookup before `trtls build` starts a worker, and `trtls store ls|gc`
(docs/store.md); `stats` and `why` are in cli/store_explain.py, `trtls engines` and `trtls rollback` in
cli/engines.py.

Exit codes: 0 done (listed, collected), 1 a verification found damaged entries or gc left an entry it could not
remove, 2 bad input (recipe, store folder)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from trtls.cli.common import load_or_report, report_error
from trtls.cli.exits import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK
from trtls.core.display import human_bytes
from trtls.core.terminal_text import terminal_safe

# what a `store ls --json` row says itself (the key is the entry's folder): an entry's build record never sets them
ROW_FIELDS = ("key", "size", "lastUsed", "verified", "refused", "damaged", "code")

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
    opened = _open_store(args.recipe)
    if opened is None:
        return EXIT_BAD_INPUT
    _, store = opened
    from trtls.store.entries import StoreUnusable

    try:  # as a build judges it first: an `entries` that is a link to elsewhere is never listed nor swept
        store.check_folders()
    except StoreUnusable as exc:
        report_error(exc.code, terminal_safe(str(exc)), terminal_safe(str(store.root)))
        return EXIT_BAD_INPUT
    if args.action == "gc":
        return _gc(store, args.max_size)
    try:  # every entry is judged by the team's key: one that cannot be read is said once, as a build says it
        store.secret()
    except OSError as exc:
        why = f"its signing key {store.signing_key_file} cannot be used: {exc.strerror or exc}"
        why = f"the store is not trusted: {why}"
        report_error("TRT340", terminal_safe(why), terminal_safe(str(store.root)))
        return EXIT_BAD_INPUT
    return _ls(store, bool(args.json), bool(args.verify))


def _gc(store: Any, max_size: str | None) -> int:
    """Evict down to the bound (quarantined entries first: they count against it), prune quarantined entries older
    than a week, remove what killed publishes left in tmp/ and the lock files no build holds; say what went, and each
    entry that could not be removed or moved aside (`Store.left_in_place`: its folder, the error, its owner and mode)
    — 1 when any was left."""
    from trtls.store.config import parse_size
    from trtls.store.lock import clean_locks

    refusal = store.sweep_refusal()
    if refusal is not None:  # not a marked store, or no place for one: gc would remove someone's files
        print(terminal_safe(f"trtls store gc: {refusal}"), file=sys.stderr)
        return EXIT_BAD_INPUT
    bound = parse_size(max_size) if max_size is not None else store.max_size
    if bound is None and max_size is not None:  # was: no bound at all, nothing evicted, exit 0
        why = f"--max-size {max_size!r} is not a size (e.g. 5GiB, 500 MB, a number of bytes above 0); nothing removed"
        print(terminal_safe(f"trtls store gc: {why}"), file=sys.stderr)
        return EXIT_BAD_INPUT
    pruned = store.prune_quarantine()  # older than QUARANTINE_KEEP_S
    if bound is not None:
        pruned += store.prune_quarantine(older_than_s=None, over=store.over_bound(bound))
    evicted = store.evict(max_size=bound)
    left = store.clean_tmp()
    locks = clean_locks(store.root)  # none held: a build of a key makes its lock file again
    for q in pruned:
        print(terminal_safe(f"  pruned quarantine/{q.path.name} ({human_bytes(q.size)})"))
    kept = list(dict.fromkeys(store.left_in_place))  # each entry it could not remove, once, located with why
    for why in kept:
        print(terminal_safe(f"  left in place: {why}"))
    print(
        f"evicted {len(evicted)} entries ({human_bytes(sum(e.size for e in evicted))}); "
        f"{len(pruned)} quarantined entries pruned ({human_bytes(sum(q.size for q in pruned))}); "
        f"{left} leftovers removed; {locks} unheld lock files removed"
        + (f"; {len(kept)} entries could not be removed (left in place)" if kept else "")
    )
    return EXIT_FAILED if kept else EXIT_OK


def _ls(store: Any, as_json: bool, verify: bool) -> int:
    """The entries, newest use first; each one refused (damaged: quarantined; not trusted: left) with why. With
    `verify` every listed engine is hashed against its record too; 1 when any entry was damaged, or when a damaged
    one stays in entries/ (TRT342: every build of its key rebuilds until it is removed — not a listing to pass)."""
    from trtls.core.display import ago
    from trtls.store.entries import LeftInPlace, NotTrusted, Refused

    entries, refused = store.scan()
    if verify:
        for e in list(entries):
            try:
                store.verify(e)
            except Refused as exc:
                entries.remove(e)
                refused.append((e.key, exc))
    damaged = [(key, exc) for key, exc in refused if not isinstance(exc, NotTrusted)]
    left = [(key, exc) for key, exc in refused if isinstance(exc, LeftInPlace)]
    entries.sort(key=lambda e: store.last_used(e.key), reverse=True)
    code = EXIT_FAILED if (verify and damaged) or left else EXIT_OK
    if as_json:
        rows: list[dict[str, Any]] = []
        for e in entries:
            said = {k: v for k, v in e.build.items() if k not in ROW_FIELDS}  # free text never says what ls says
            rows.append({**said, "key": e.key, "size": e.size, "lastUsed": store.last_used(e.key)})
            if verify:
                rows[-1]["verified"] = True
        for key, why in refused if verify else left:  # a damaged entry still in entries/ is listed always
            row = {"key": key, "refused": str(why), "damaged": not isinstance(why, NotTrusted), "code": _code(why)}
            rows.append(row | ({"verified": False} if verify else {}))
        print(json.dumps(rows))
        return code
    quarantined = store.quarantined()
    print(
        terminal_safe(
            f"{store.root} ({store.mode}): {len(entries)} entries, {human_bytes(sum(e.size for e in entries))}; "
            f"{len(quarantined)} quarantined ({human_bytes(sum(q.size for q in quarantined))})"
        )
    )
    for e in entries:
        b = e.build
        used = ago(store.last_used(e.key))
        line = f"  {e.key[:12]}  {human_bytes(e.size):>10}  {b.get('engine')}  build {b.get('buildId')}  used {used}"
        print(terminal_safe(line + ("  verified" if verify else "")))
    for _, why in refused:
        print(terminal_safe(f"  refused: {_code(why)} {why}"))
    if verify:
        print(f"verified {len(entries)} entries; {len(damaged)} damaged")
    return code


def _code(refused: Exception) -> str:
    """The code a refused entry is said with: TRT342 damaged and left in place, TRT340 not trusted, TRT334 damaged
    (quarantined)."""
    from trtls.store.entries import LeftInPlace, NotTrusted

    return "TRT342" if isinstance(refused, LeftInPlace) else "TRT340" if isinstance(refused, NotTrusted) else "TRT334"


def register(sub: Any) -> None:
    from trtls.cli import engines, store_explain

    s = sub.add_parser(
        "store",
        help="the engine store: list (ls), collect (gc), statistics (stats), explain two keys (why)",
        epilog="exit codes: 0 listed, collected or explained, 1 a verification found damaged entries or gc left one it "
        "could not remove, 2 bad input",
    )
    actions = s.add_subparsers(dest="action", required=True, metavar="{ls,gc,stats,why}")
    ls = actions.add_parser(
        "ls", help="list the entries", epilog="exit codes: 0 listed, 1 damaged entries, 2 bad input"
    )
    gc = actions.add_parser(
        "gc",
        help="evict down to the size bound; remove leftovers",
        epilog="exit codes: 0 collected, 1 an entry could not be removed (left in place, each said), 2 bad input",
    )
    for p in (ls, gc):
        p.add_argument(
            "recipe",
            nargs="?",
            help="trtls.toml or its folder whose store to use (default: ., else the per-user store)",
        )
        p.set_defaults(func=cmd_store)
    gc.add_argument("--max-size", help="evict down to this size (e.g. 5GiB) instead of the store's bound")
    ls.add_argument("--json", action="store_true", help="one JSON array")
    ls.add_argument(
        "--verify",
        action="store_true",
        help="hash every listed engine against its record; quarantine the damaged ones (exit 1 when any was)",
    )
    store_explain.register_actions(actions)
    engines.register(sub)
