"""`trtls engines` (every successful build of an engine table) and `trtls rollback` (an earlier one restored)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from trtls.cli.common import load_or_report, report_error, report_finding
from trtls.cli.exits import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK
from trtls.cli.usage import recipe_argument
from trtls.core.display import human_bytes, local_time
from trtls.core.terminal_text import terminal_safe


def cmd_engines(args: argparse.Namespace) -> int:
    """Every known-good build of a table; `(evicted)` when the store no longer holds its engine (a rollback to it
    would fail), `(pinned)` for the build a rollback pinned."""
    from trtls.store.known_good import KnownGood, Pin

    loaded = load_or_report(args.recipe)
    if loaded is None:
        return EXIT_BAD_INPUT
    if args.name not in loaded.recipe.engines:
        report_error("TRT107", f"no engine named {args.name}", str(loaded.path))
        return EXIT_BAD_INPUT
    state = loaded.path.parent / ".trtls"
    known = KnownGood(state, args.name)
    records = known.records()
    if known.problem is not None:  # a symlink, a FIFO, a damaged record: never "no build recorded yet"
        print(
            terminal_safe(f"warning: the known-good record of {args.name} was not read: {known.problem}"),
            file=sys.stderr,
        )
    pins = Pin(state, args.name)
    pin, damaged = pins.read(), pins.damaged()
    if damaged is not None:  # a build refuses it (TRT338): say it here too, where the builds are listed
        print(terminal_safe(f"warning: TRT338 the rollback's pin {pins.path} {damaged}"), file=sys.stderr)
    in_store = _in_store(loaded, records)
    if args.json:
        out = [
            {
                **{k: v for k, v in r.items() if k != "parts"},
                "inStore": in_store.get(_held(r)),
                "pinned": _is_pinned(r, pin),
            }
            for r in records
        ]
        print(json.dumps(out, default=str))
        return EXIT_OK if known.problem is None else EXIT_FAILED
    if not records and known.problem is None:
        print(f"{args.name}: no successful build recorded yet")
    for r in records:
        when = local_time(r.get("startedAt"), "%Y-%m-%d %H:%M", "an unknown time")
        changed = "; ".join(r.get("changes") or []) or "—"
        if not r.get("stored"):
            marks = "  (not in the store)"
        else:
            marks = "  (evicted)" if in_store.get(_held(r)) is False else ""
            if marks and any(ok for (key, _), ok in in_store.items() if key == _held(r)[0]):
                marks = "  (replaced: the store's entry of its key holds another build's bytes)"
        marks += "  (pinned)" if _is_pinned(r, pin) else ""
        size = human_bytes(r.get("size") or 0)
        print(terminal_safe(f"{r.get('buildId')}  {when}  {str(r.get('key'))[:12]}  {size}  {changed}{marks}"))
    return EXIT_OK if known.problem is None else EXIT_FAILED


def _is_pinned(record: dict[str, Any], pin: dict[str, Any] | None) -> bool:
    return pin is not None and record.get("buildId") == pin.get("buildId") and record.get("key") == pin.get("key")


def _held(record: dict[str, Any]) -> tuple[str, Any]:
    """A build's engine as the store would hold it: its key and its bytes' sha256 (two builds of one key may differ in
    bytes — a --rebuild that was not deterministic replaced the entry — and a rollback restores only the same bytes)."""
    return str(record.get("key")), record.get("sha256")


def _in_store(loaded: Any, records: list[dict[str, Any]]) -> dict[tuple[str, Any], bool | None]:
    """(key, sha256) → whether the store holds an entry of that key with those bytes, looked up read-only (nothing
    restored, quarantined or marked used); None for every build when there is no store to ask (off, or not usable)."""
    from trtls.store.config import store_config
    from trtls.store.entries import NotTrusted, Refused, Store

    config = store_config(loaded.recipe.store, loaded.base_dir)
    held = {_held(r) for r in records}
    if config is None:
        return dict.fromkeys(held)
    store = Store.read_only(config)
    found: dict[tuple[str, Any], bool | None] = {}
    for key, sha in held:
        try:
            entry = store.get(key)
        except NotTrusted:
            found[key, sha] = None  # perhaps whole, not ours to trust: unknown
            continue
        except (Refused, OSError):
            entry = None
        found[key, sha] = entry is not None and (sha is None or entry.sha256 == sha)
    return found


def cmd_rollback(args: argparse.Namespace) -> int:
    from trtls.app.results import Refused
    from trtls.app.rollback import RollbackFailed, request_rollback
    from trtls.cli.store_lookup import report_refused

    loaded = load_or_report(args.recipe)
    if loaded is None:
        return EXIT_BAD_INPUT
    asked = request_rollback(loaded, args.name, args.to, "trtls rollback")
    if isinstance(asked, Refused):  # an engine the recipe has no table of (TRT107), as `trtls build` says it
        return report_refused(loaded, asked)
    if isinstance(asked, RollbackFailed):  # located on the engine's table, as the editor's refusal
        report_finding(loaded, asked.finding)
        return EXIT_FAILED
    print(terminal_safe(f"{args.name}: {asked.summary.message}"))
    if asked.evidence_error:  # restored, but its record could not be written (TRT413)
        print(terminal_safe(f"  evidence: {asked.evidence_error}"))
        return EXIT_FAILED
    print(terminal_safe(f"  evidence: {asked.evidence_path}"))
    return EXIT_OK


def register(sub: Any) -> None:
    e = sub.add_parser(
        "engines",
        help="every successful build of an engine: id, date, key, size, what changed",
        epilog="exit codes: 0 listed, 1 the known-good record could not be read (it says why), 2 bad input",
    )
    e.add_argument("name", help="engine table")
    recipe_argument(e)
    e.add_argument("--json", action="store_true", help="one JSON array of the builds")
    e.set_defaults(func=cmd_engines)
    r = sub.add_parser(
        "rollback",
        help="restore an earlier known-good engine to the output, atomically, and pin it",
        description="Restore an earlier known-good engine to the output, atomically (verified by sha256), and pin "
        "it: `trtls build` serves the pinned engine until the recipe's engine key changes or `trtls build --unpin`.",
        epilog="exit codes: 0 restored, 1 nothing to roll back to or the entry failed verification, 2 bad input",
    )
    r.add_argument("name", help="engine table")
    recipe_argument(r)
    r.add_argument(
        "--to",
        metavar="BUILD",
        help="the build whose engine to restore (default: the newest known-good build older than the one whose "
        "engine is at the output, so a second rollback goes further back)",
    )
    r.set_defaults(func=cmd_rollback)
