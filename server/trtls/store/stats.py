"""The store's statistics (ccache -s, Bazel's "N remote cache hit" line): every hit and miss is recorded in the store
itself, so every checkout, account and farm node that shares the store adds to one count.

    <store>/stats/<YYYY-MM-DD>.<uid>.jsonl   one JSON line per event, appended (the date is UTC's)

One file per day and account: an account appends only to its own file, so a team's store needs no lock and no
shared file mode; each line is one `write` of fewer than `LINE_LIMIT` bytes on an `O_APPEND` descriptor, so lines of
concurrent builds never interleave. A line says when, which event (`hit`: `how` = restored | kept | fast | node — a
farm node served the cell from the remote store —, with the engine's size and the producing build's duration, the
time the hit saved; `miss`: the `reasons` the evidence gives as `rebuiltBecause`), which engine table and key, and
on which host. A matrix cell is counted once, when it ends: a hit when its node served it, else a miss.

Recording never raises and never delays a build by more than an append: a store this process does not write (`mode =
"read"`, or one found unwritable) records nothing. Days older than `KEEP_DAYS` are not counted, and the first event
of an account's day removes the files older than that (by the date in their name, only names this module makes).

The lines are read as untrusted input (anyone who may write the store may write them): a line that is not JSON, too
long, or whose fields are not what this module writes (an engine name with control characters, a key that is not an
engine key, a negative size) is skipped and counted, never shown."""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import time
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trtls import fs
from trtls.fs import Kind, parse_json

if TYPE_CHECKING:
    from trtls.store.entries import Entry, Store

FOLDER = "stats"
KEEP_DAYS = 90
LINE_LIMIT = 4000  # bytes: under the 4 KiB that one O_APPEND write keeps whole on every local file system
FILE_LIMIT = 256 * 1024 * 1024  # bytes read from one day's file of one account (a year of a busy farm is far less)
NAME_LIMIT = 200  # characters of an engine name or a host name kept in a line
REASON_LIMIT = 300  # characters of one miss reason kept in a line
FILE_NAME = re.compile(r"([0-9]{4}-[0-9]{2}-[0-9]{2})\.([0-9]{1,10})\.jsonl")  # Kind.store_stats allows these only
HOW = ("restored", "kept", "fast", "node")
KEY_TEXT = re.compile(r"[0-9a-f]{64}")
SETTING_LINE = re.compile(r"[A-Za-z_][A-Za-z0-9_]* .* → |[A-Za-z_][A-Za-z0-9_]* .{200}")  # whole, or cut in its value
MAX_SAVED_S = 366 * 24 * 3600.0  # a producing build's duration above this is not one (a forged line)

# -- recording --------------------------------------------------------------------------------------------------


def record_hit(store: Store, entry: Entry, engine: str, how: str) -> None:
    """A build served from the store: `how` is restored | kept | fast (the fast path, restored or kept) | node (a
    matrix cell its farm node served from the remote store: builds/farm/node_reuse.py). Never raises; a read-only
    store records nothing."""
    with contextlib.suppress(Exception):
        saved = _seconds(entry.build.get("durationS"))
        _record(
            store,
            {
                "event": "hit",
                "how": how,
                "engine": engine,
                "key": entry.key,
                "size": entry.size,
                "savedS": saved,
                "from": _text(entry.build.get("buildId"), NAME_LIMIT),
            },
        )


def record_miss(store: Store, key: str, engine: str, reasons: list[str]) -> None:
    """A build that runs (the key was not in the store, or --rebuild): `reasons` as the evidence's rebuiltBecause.
    Never raises; a read-only store records nothing."""
    with contextlib.suppress(Exception):
        _record(store, {"event": "miss", "engine": engine, "key": key, "reasons": [str(r) for r in reasons]})


def _record(store: Store, event: dict[str, Any]) -> None:
    if store.mode != "read_write" or not getattr(store, "writable", True):
        return  # a store this process does not write: not even its statistics
    now = time.time()
    line = _line({"time": round(now, 3), **event, "host": _text(os.uname().nodename, NAME_LIMIT)})
    if not line:
        return
    root = Path(store.root)
    folder = root / FOLDER
    if not os.path.isdir(folder):
        from trtls.fs.store_root import is_store

        if not is_store(root):
            return  # not a store trtls made (nor one it may make here): nothing is created in it
        fs.ensure_folder(folder, within=root)
        _fit(store, folder, folder=True)
    path = folder / f"{_day(now)}.{os.geteuid()}.jsonl"
    first_today = not os.path.lexists(path)
    from trtls.fs.store_root import shared_modes

    fs.append_text(path, line, kind=Kind.store_stats, within=root, mode=shared_modes(root)[1])
    if first_today:
        _fit(store, path, folder=False)
        prune(store, now)


def _fit(store: Store, path: Path, folder: bool) -> None:
    fit = getattr(store, "fit", None)
    if fit is not None:
        fit(path, folder=folder)


def _line(event: dict[str, Any]) -> str:
    """One JSON line under LINE_LIMIT bytes: the engine and each reason cut to their limits, then reasons dropped
    from the end (`reasonsDropped` says how many) until it fits."""
    event["engine"] = _text(event.get("engine"), NAME_LIMIT)
    reasons = [_text(r, REASON_LIMIT) for r in event.get("reasons") or []]
    dropped = 0
    while True:
        if "reasons" in event:
            event["reasons"] = reasons
            if dropped:
                event["reasonsDropped"] = dropped
        text = json.dumps(event, ensure_ascii=True, separators=(",", ":")) + "\n"
        if len(text) < LINE_LIMIT or not reasons:
            return text if len(text) < LINE_LIMIT else ""
        reasons.pop()
        dropped += 1


def prune(store: Store, now: float | None = None) -> int:
    """Remove the stats files of days older than KEEP_DAYS (any account's: a team's stats folder is shared); only
    names this module makes, never through a link. Returns how many were removed."""
    cutoff = _day((now or time.time()) - KEEP_DAYS * 86400)
    root = Path(store.root)
    removed = 0
    for name in _names(root / FOLDER):
        m = FILE_NAME.fullmatch(name)
        if m is None or m.group(1) >= cutoff:
            continue
        with contextlib.suppress(OSError):
            removed += fs.remove_file(root / FOLDER / name, kind=Kind.store_stats, within=root)
    return removed


def _names(folder: Path) -> list[str]:
    try:
        return sorted(os.listdir(folder)) if not os.path.islink(folder) else []
    except OSError:
        return []


def _day(t: float) -> str:
    return time.strftime("%Y-%m-%d", time.gmtime(t))


def _text(value: object, limit: int) -> str:
    return (value if isinstance(value, str) else "" if value is None else str(value))[:limit]


def _seconds(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return 0.0
    return float(value) if 0 <= value <= MAX_SAVED_S else 0.0


# -- reading ----------------------------------------------------------------------------------------------------


def miss_buckets(reasons: list[str]) -> list[str]:
    """The buckets a miss counts in (`trtls store stats`' "misses by reason"): its first reason when that is why the
    build ran at all (`--rebuild`, the table's first build, a damaged entry, the same key evicted), else one bucket
    per changed part of the key (`onnx`, `settings`, `profiles`, `builder`, …; a miss whose settings and model both
    changed counts in both). Only these fixed names: a reason's own text is never a bucket."""
    first = reasons[0] if reasons else ""
    if first == "--rebuild":
        return ["--rebuild"]
    if first.startswith("first build of this engine table"):
        return ["first build of this engine table"]
    if first.startswith("same key as the last build"):
        return ["same key as the last build (not in the store)"]
    if first.startswith("the store's entry of this key was damaged"):
        return ["damaged entry (quarantined)"]
    if not reasons:
        return ["unknown"]
    out: list[str] = []
    for reason in reasons:
        bucket = _part(reason)
        if bucket not in out:
            out.append(bucket)
    return out


_PARTS = (
    ("onnx ", "onnx"),
    ("external data ", "external data"),
    ("plugin library ", "plugin files"),
    ("serialized plugin ", "plugin files"),
    ("profiles ", "profiles"),
    ("profile ", "profiles"),
    ("precision.", "precision"),
    ("plugins.", "plugins"),
    ("builder ", "builder"),
    ("target ", "target"),
    ("format ", "key format"),
    ("protocol ", "key format"),
    ("the engine key changed", "the key (its parts not recorded)"),
)


def _part(reason: str) -> str:
    """Which part of the key a `store.diff.key_changes` line names; a line it writes for a setting is
    `<setting> <old> → <new>`."""
    for prefix, bucket in _PARTS:
        if reason.startswith(prefix):
            return bucket
    return "settings" if SETTING_LINE.match(reason) else "other"


def stats(store: Store, days: int = KEEP_DAYS, now: float | None = None) -> dict[str, Any]:
    """The store's counts over the last `days` days (at most KEEP_DAYS), as `trtls store stats --json` prints them:
    hits by how, misses by reason, hit rate, time saved, per engine and per day; the store's entries and size, and
    how many of them share one engine (`dedup`); how many lines were skipped (unreadable or not ours)."""
    days = max(1, min(int(days), KEEP_DAYS))
    now = time.time() if now is None else now
    since = now - days * 86400
    hits: Counter[str] = Counter()
    reasons: Counter[str] = Counter()
    misses, saved, skipped, files = 0, 0.0, 0, 0
    per_engine: dict[str, dict[str, Any]] = {}
    per_day: dict[str, dict[str, Any]] = {}
    root = Path(store.root)
    for name in _names(root / FOLDER):
        m = FILE_NAME.fullmatch(name)
        if m is None or m.group(1) < _day(since):
            continue
        files += 1
        for event in _events(root, root / FOLDER / name):
            if event is None:
                skipped += 1
                continue
            if event["time"] < since or event["time"] > now + 86400:
                continue
            rows = (
                per_engine.setdefault(event["engine"], _row()),
                per_day.setdefault(_day(event["time"]), _row()),
            )
            if event["event"] == "hit":
                hits[event["how"]] += 1
                saved += event["savedS"]
                for row in rows:
                    row["hits"] += 1
                    row["timeSavedS"] += event["savedS"]
            else:
                misses += 1
                reasons.update(miss_buckets(event["reasons"]))
                for row in rows:
                    row["misses"] += 1
    total_hits = sum(hits.values())
    entries, size, refused, dedup = _contents(store)
    return {
        "store": str(root),
        "mode": store.mode,
        "days": days,
        "since": _day(since),
        "files": files,
        "hits": {"total": total_hits, **{how: hits[how] for how in HOW}},
        "misses": {"total": misses, "byReason": dict(reasons.most_common())},
        "hitRate": _rate(total_hits, misses),
        "timeSavedS": round(saved, 3),
        "entries": entries,
        "size": size,
        "refusedEntries": refused,
        "dedup": dedup,
        "perEngine": {k: _rounded(v) for k, v in sorted(per_engine.items())},
        "perDay": {k: _rounded(v) for k, v in sorted(per_day.items())},
        "skippedLines": skipped,
    }


def _row() -> dict[str, Any]:
    return {"hits": 0, "misses": 0, "timeSavedS": 0.0}


def _rounded(row: dict[str, Any]) -> dict[str, Any]:
    return {**row, "hitRate": _rate(row["hits"], row["misses"]), "timeSavedS": round(row["timeSavedS"], 3)}


def _rate(hits: int, misses: int) -> float | None:
    return round(hits / (hits + misses), 4) if hits + misses else None


def _events(root: Path, path: Path) -> list[dict[str, Any] | None]:
    """The file's events, each checked (None for a line that is skipped); nothing when it cannot be read as a
    regular file in the store (a link, a FIFO)."""
    out: list[dict[str, Any] | None] = []
    try:
        with fs.open_regular(path, limit=None, follow=False, within=root) as fh:
            read = 0
            while read < FILE_LIMIT:
                raw = fh.readline(LINE_LIMIT + 1)
                if not raw:
                    break
                read += len(raw)
                if len(raw) > LINE_LIMIT or not raw.endswith(b"\n"):
                    while raw and not raw.endswith(b"\n"):  # the rest of an overlong line
                        raw = fh.readline(LINE_LIMIT + 1)
                        read += len(raw)
                    out.append(None)
                    continue
                out.append(_event(raw))
    except OSError:
        return out
    return out


def _event(raw: bytes) -> dict[str, Any] | None:
    """A line as this module writes it, or None."""
    try:
        data = parse_json(raw)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    t, engine, key = data.get("time"), data.get("engine"), data.get("key")
    if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t):
        return None
    if not _safe_name(engine) or not (isinstance(key, str) and KEY_TEXT.fullmatch(key)):
        return None
    out: dict[str, Any] = {"time": float(t), "engine": engine, "key": key}
    if data.get("event") == "hit":
        saved, size = data.get("savedS"), data.get("size")
        if data.get("how") not in HOW or type(size) is not int or size < 0:
            return None
        if isinstance(saved, bool) or not isinstance(saved, (int, float)) or _seconds(saved) != saved:
            return None
        return {**out, "event": "hit", "how": data["how"], "savedS": float(saved)}
    if data.get("event") == "miss":
        reasons = data.get("reasons")
        if not isinstance(reasons, list) or not all(isinstance(r, str) for r in reasons):
            return None
        return {**out, "event": "miss", "reasons": reasons}
    return None


def _safe_name(value: object) -> bool:
    """An engine name as a recipe can give one: printable, one line, bounded."""
    if not isinstance(value, str) or not 0 < len(value) <= NAME_LIMIT:
        return False
    from trtls.core.terminal_text import terminal_safe

    return terminal_safe(value, keep_newlines=False) == value


def _contents(store: Store) -> tuple[int, int, int, dict[str, int]]:
    """(whole entries, their bytes, entries refused, what their engines share): read as a `mode = "read"` store, so
    counting quarantines, marks and fetches nothing. `dedup`: how many distinct engines (by sha256) the entries hold,
    how many entries hold an engine another entry holds too, and the bytes those copies beyond the first take — the
    figure docs/store.md's "Content dedup" says to watch before the local store shares blobs."""
    reader = store.reader()
    try:
        whole, refused = reader.scan()
    except OSError:
        whole, refused = [], []
    by_sha = Counter(e.sha256 for e in whole)
    dedup = {
        "distinctEngines": len(by_sha),
        "sharedEntries": sum(n for n in by_sha.values() if n > 1),
        "duplicateSize": sum(e.size for e in whole) - sum({e.sha256: e.size for e in whole}.values()),
    }
    return len(whole), sum(e.size for e in whole), len(refused), dedup
