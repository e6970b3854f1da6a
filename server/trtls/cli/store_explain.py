"""`trtls store stats` (hits, misses by reason, time saved, size, per engine and per day: ccache -s) and `trtls store
why A B` (what differs between two builds' or keys' engine keys, and whether each is in the store: Bazel's explain).

The counts are `trtls.store.stats.stats`, the differences `trtls.store.diff.key_changes`; this module finds what A
and B name and prints. Exit codes: 0 shown or explained (a store with no statistics yet too), 2 bad input (TRT341: a
build id or key that names nothing, TRT330: no store)."""

from __future__ import annotations

import argparse
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trtls.cli.common import find_recipe, load_or_report, report_error
from trtls.cli.exits import EXIT_BAD_INPUT, EXIT_OK
from trtls.core.display import human_bytes, human_seconds
from trtls.core.terminal_text import terminal_safe

if TYPE_CHECKING:  # imported where a record is read: `trtls store stats` loads no model
    from trtls.core.summary_record import Summary, SummaryProblem

RUN_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,199}")  # a run folder's name as trtls makes one
KEY_PREFIX = re.compile(r"[0-9a-f]{8,64}")

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


class Unresolved(Exception):
    """What A or B names cannot be found (TRT341, located on the recipe or the store)."""

    def __init__(self, message: str, where: str):
        super().__init__(message)
        self.where = where


@dataclass
class Side:
    """One of A and B: what was asked (`ref`), what it is, its engine key and the key's parts."""

    ref: str
    kind: str  # build | key | recipe
    key: str
    parts: dict[str, Any]
    build_id: str | None = None
    engine: str | None = None
    in_store: bool | None = None  # None: no store to ask

    def as_json(self) -> dict[str, Any]:
        return {"ref": self.ref, "kind": self.kind, "key": self.key, "buildId": self.build_id, "engine": self.engine,
                "inStore": self.in_store}  # fmt: skip

    def label(self) -> str:
        where = {True: "in the store", False: "not in the store", None: "no store to ask"}[self.in_store]
        if self.kind == "key":
            built = f" (last built by {self.build_id})" if self.build_id else ""
            return f"key {self.key[:12]}{built}  {where}"
        what = f"the recipe now ({self.engine})" if self.kind == "recipe" else f"build {self.build_id}"
        if self.kind == "build" and self.engine:
            what += f" ({self.engine})"
        return f"{what}  key {self.key[:12]}  {where}"


def cmd_why(args: argparse.Namespace) -> int:
    opened = _open_for_why(args.recipe)
    if opened is None:
        return EXIT_BAD_INPUT
    loaded, store = opened
    where = str(loaded.path) if loaded is not None else str(store.root if store is not None else ".")
    try:
        sides = _resolve(args.a, args.b, loaded, store, args.engine, where)
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
    return loaded, (_reader(Store, config) if config is not None else None)


def _reader(store_type: Any, config: Any) -> Any:
    """The store as `mode = "read"`: asking it whether a key is there quarantines, marks and fetches nothing."""
    return store_type(config.path, "read", config.max_size, trust=config.trust, recipe_dir=config.recipe_dir,
                      signing_key_file=config.signing_key_file)  # fmt: skip


def _resolve(a: str, b: str, loaded: Any, store: Any, engine: str | None, where: str) -> tuple[Side, Side]:
    """A and B; `recipe` is keyed last, for the engine the other side names when `--engine` does not."""
    known = _known_good(loaded)
    sides: dict[str, Side] = {}
    for ref in (a, b):
        if ref != "recipe" and ref not in sides:
            sides[ref] = _side(ref, loaded, store, known, where)
    if "recipe" in (a, b):
        other = next((s.engine for s in sides.values() if s.engine), None)
        sides["recipe"] = _recipe_side(loaded, store, engine or other, where)
    return sides[a], sides[b]


def _side(ref: str, loaded: Any, store: Any, known: list[tuple[str, dict[str, Any]]], where: str) -> Side:
    text = ref.strip().lower()
    if KEY_PREFIX.fullmatch(text):
        key = _full_key(text, store, known, where)
        table, build = next(((n, r) for n, r in reversed(known) if r.get("key") == key), (None, None))
        side = Side(ref, "key", key, {}, build_id=build and build.get("buildId"), engine=table)
        return _completed(side, store, known, where)
    if loaded is None:
        raise Unresolved(f"{ref!r} is not an engine key, and a build id needs its recipe: trtls store why A B RECIPE",
                         where)  # fmt: skip
    for name, record in reversed(known):
        if ref in (record.get("buildId"), record.get("restoredAs")):
            side = Side(ref, "build", str(record["key"]), {}, build_id=ref, engine=name)
            if isinstance(record.get("parts"), dict):
                side.parts = record["parts"]
            return _completed(side, store, known, where)
    from trtls.core.summary_record import SummaryProblem

    summary = _summary(loaded, ref)
    if isinstance(summary, SummaryProblem):
        raise Unresolved(str(summary), where)
    if summary is None:
        short = " (an engine key prefix needs 8 or more hex digits)" if re.fullmatch(r"[0-9a-f]{1,7}", text) else ""
        raise Unresolved(f"no build {ref!r} in {loaded.path.parent / '.trtls'} (known-good records and runs){short}",
                         where)  # fmt: skip
    from trtls.store.key import is_key

    recorded: Any = summary.engineKey
    if not is_key(recorded):
        raise Unresolved(f"build {ref!r} has no engine key (it was not keyed: an external worker, injected faults, "
                         "--no-store, or it stopped before keying)", where)  # fmt: skip
    return _completed(Side(ref, "build", str(recorded), {}, build_id=ref, engine=summary.engine), store, known, where)


def _completed(side: Side, store: Any, known: list[tuple[str, dict[str, Any]]], where: str) -> Side:
    """The side with whether the store holds its key, and its key's parts from its record, the store's entry or any
    recorded build of the same key."""
    entry = _entry(store, side.key)
    side.in_store = None if store is None else entry is not None
    if not side.parts and entry is not None and isinstance(entry.record.get("parts"), dict):
        side.parts = entry.record["parts"]
    if not side.parts:
        found = next(
            (r["parts"] for _, r in known if r.get("key") == side.key and isinstance(r.get("parts"), dict)), None
        )
        side.parts = found or {}
    if not side.parts:
        raise Unresolved(f"the parts of key {side.key[:12]} ({side.ref}) are recorded nowhere: not in the store, "
                         "and no known-good build of the recipe has them", where)  # fmt: skip
    return side


def _full_key(text: str, store: Any, known: list[tuple[str, dict[str, Any]]], where: str) -> str:
    """The one key a stored entry or a recorded build has that starts with `text` (a full key or 8+ hex digits)."""
    candidates = {str(r.get("key")) for _, r in known if str(r.get("key")).startswith(text)}
    if store is not None:
        try:
            names = os.listdir(store.root / "entries")
        except OSError:
            names = []
        candidates |= {n for n in names if len(n) == 64 and n.startswith(text) and KEY_PREFIX.fullmatch(n)}
    if len(candidates) == 1:
        return candidates.pop()
    if len(text) == 64:
        raise Unresolved(f"no entry of key {text[:12]}… in the store, and no recorded build has that key", where)
    if not candidates:
        raise Unresolved(f"no engine key starts with {text}: not in the store, not a recorded build's", where)
    raise Unresolved(f"{len(candidates)} engine keys start with {text}: give more digits", where)


def _entry(store: Any, key: str) -> Any:
    if store is None:
        return None
    from trtls.store.entries import Refused

    try:
        return store.get(key)
    except (Refused, OSError):
        return None  # damaged or not trusted: not an entry a build would restore


def _recipe_side(loaded: Any, store: Any, engine: str | None, where: str) -> Side:
    """The key the recipe computes now for `engine` (as `trtls build` and the lens compute it: digest cache, no
    TensorRT)."""
    if loaded is None:
        raise Unresolved("`recipe` needs a recipe: run it in the recipe's folder or name it", where)
    names = list(loaded.recipe.engines)
    if engine is None:
        if len(names) != 1:
            raise Unresolved(f"the recipe has {len(names)} engine tables: name one with --engine", where)
        engine = names[0]
    if engine not in names:
        raise Unresolved(f"the recipe has no engine table named {engine!r}", where)
    if loaded.engine(engine).worker:
        raise Unresolved(f"{engine} is built by an external worker: its builds are not keyed", where)
    from trtls.builds.cuda import cuda_driver
    from trtls.builds.supervisor.build import state_dir, worker_job
    from trtls.store.key import KeyUnavailable, engine_key

    try:
        key = engine_key(worker_job(loaded, engine, "why"), state_dir(loaded.path), cuda_driver())
    except (KeyUnavailable, OSError) as exc:
        raise Unresolved(f"the recipe's key for {engine} cannot be computed: {exc}", where) from exc
    side = Side("recipe", "recipe", key.hex, key.parts, engine=engine)
    entry = _entry(store, key.hex)
    side.in_store = None if store is None else entry is not None
    return side


def _known_good(loaded: Any) -> list[tuple[str, dict[str, Any]]]:
    """(engine table, record) for every known-good build of the recipe, oldest first per table."""
    if loaded is None:
        return []
    from trtls.store.known_good import KnownGood

    sdir = loaded.path.parent / ".trtls"
    try:
        names = sorted(os.listdir(sdir / "engines"))
    except OSError:
        return []
    out = []
    for name in names:
        stem = name[: -len(".json")]
        if not name.endswith(".json") or stem.endswith((".hit", ".pin")) or not RUN_ID.fullmatch(stem):
            continue
        out += [(stem, r) for r in KnownGood(sdir, stem).records()]
    return out


def _summary(loaded: Any, build_id: str) -> Summary | SummaryProblem | None:
    """`.trtls/runs/<id>/summary.json` of a run of the recipe (a regular file, never through a link, inside the
    recipe's folder), or None when there is no readable JSON there; a problem when it does not hold together."""
    if not RUN_ID.fullmatch(build_id) or ".." in build_id:
        return None
    from trtls.core.summary_record import RECORD_LIMIT, SUMMARY_NAME, summary_of
    from trtls.fs import read_text

    path = loaded.path.parent / ".trtls" / "runs" / build_id / SUMMARY_NAME
    try:
        data = json.loads(read_text(path, limit=RECORD_LIMIT, follow=False, within=loaded.path.parent))
    except (OSError, ValueError):
        return None
    return summary_of(data, path)


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
