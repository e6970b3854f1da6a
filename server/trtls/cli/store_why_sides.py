"""What `trtls store why A B`'s A and B name, each resolved to a side: its engine key, the key's parts and whether the
store holds it. A side is a build id (a known-good build of the recipe or one of its runs), an engine key or a unique
prefix of 8+ hex digits (a stored entry's or a recorded build's), or `recipe` (the key the recipe computes now, as
`trtls build` computes it: no TensorRT); the parts come from its record, the store's entry or any recorded build of
the same key. What names nothing raises `Unresolved` (TRT341). cli/store_explain.py compares the two sides and prints.

Runs in the CLI process (`trtls store why`): it reads the recipe's `.trtls` records and asks the store read-only;
nothing is started, built or written."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported where a run's record is read (the model loads pydantic)
    from trtls.core.summary_record import Summary, SummaryProblem

RUN_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,199}")  # a run folder's name as trtls makes one
KEY_PREFIX = re.compile(r"[0-9a-f]{8,64}")


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
        return {
            "ref": self.ref,
            "kind": self.kind,
            "key": self.key,
            "buildId": self.build_id,
            "engine": self.engine,
            "inStore": self.in_store,
        }

    def label(self) -> str:
        where = {True: "in the store", False: "not in the store", None: "no store to ask"}[self.in_store]
        if self.kind == "key":
            built = f" (last built by {self.build_id})" if self.build_id else ""
            return f"key {self.key[:12]}{built}  {where}"
        what = f"the recipe now ({self.engine})" if self.kind == "recipe" else f"build {self.build_id}"
        if self.kind == "build" and self.engine:
            what += f" ({self.engine})"
        return f"{what}  key {self.key[:12]}  {where}"


def resolve_sides(a: str, b: str, loaded: Any, store: Any, engine: str | None, where: str) -> tuple[Side, Side]:
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
        raise Unresolved(
            f"{ref!r} is not an engine key, and a build id needs its recipe: trtls store why A B RECIPE", where
        )
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
        raise Unresolved(
            f"no build {ref!r} in {loaded.path.parent / '.trtls'} (known-good records and runs){short}", where
        )
    from trtls.store.key import is_key

    recorded: Any = summary.engineKey
    if not is_key(recorded):
        raise Unresolved(
            f"build {ref!r} has no engine key (it was not keyed: an external worker, injected faults, "
            "--no-store, or it stopped before keying)",
            where,
        )
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
        raise Unresolved(
            f"the parts of key {side.key[:12]} ({side.ref}) are recorded nowhere: not in the store, "
            "and no known-good build of the recipe has them",
            where,
        )
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
    from trtls.builds.supervisor.job import state_dir, worker_job
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
    from trtls.fs import parse_json, read_text

    path = loaded.path.parent / ".trtls" / "runs" / build_id / SUMMARY_NAME
    try:
        data = parse_json(read_text(path, limit=RECORD_LIMIT, follow=False, within=loaded.path.parent))
    except (OSError, ValueError):
        return None
    return summary_of(data, path)
