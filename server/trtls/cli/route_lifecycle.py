"""The route lifecycle commands: `trtls route promote|status|canary|rollback [RECIPE] --route NAME` (the rules are in
trtls.gates.lifecycle; this only renders). `cli.route_dialect` registers them; `lifecycle_words` reads their words
(and the old `NAME --recipe R`, with a note)."""

from __future__ import annotations

import sys
from typing import Any

from trtls.cli.common import report_command_error, report_finding
from trtls.cli.exits import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_HOLD, EXIT_OK, EXIT_REJECT
from trtls.cli.route import chosen_or_exit, report_recipe_unread
from trtls.cli.usage import USAGE, emit_error
from trtls.route.build import load_route_recipe

CANARY_STEPS = ("start", "pass", "fail")


def lifecycle_words(args: Any) -> tuple[str, str | None, str | None, str | None] | str:
    """(recipe, route or None, canary step or None, deprecation note or None) from a lifecycle command's words and
    options, or what is wrong with them. The one dialect is `[RECIPE] --route NAME` (as `trtls gates`, `route build`
    and `route lock` take it); the old `NAME --recipe R` (or a bare `NAME`) still works, with a note."""
    command = getattr(args, "lifecycle", "status")
    words = list(getattr(args, "words", None) or [])
    step = None
    if command == "canary":
        if not words or words[-1] not in CANARY_STEPS:
            return (
                "trtls route canary: give the step: start, pass or fail (trtls route canary [RECIPE] --route NAME STEP)"
            )
        step = words.pop()
    route, old_recipe = getattr(args, "route", None), getattr(args, "recipe", None)
    if len(words) > 1:
        return f"trtls route {command}: too many words: {' '.join(words)} (trtls route {command} [RECIPE] --route NAME)"
    word = words[0] if words else None
    old = False
    if old_recipe is not None:  # `NAME --recipe R`: the word, if any, is the route
        recipe, old = old_recipe, True
        if word is not None:
            if route is not None and route != word:
                return f"trtls route {command}: two routes given: {word} and --route {route}"
            route = word
    elif route is not None or word is None or _names_a_recipe(word):
        recipe = word or "."
    else:  # a bare `NAME`: the old dialect, on the recipe in this folder
        recipe, route, old = ".", word, True
    note = None
    if old:
        tail = f" {step}" if step else ""
        where = "" if recipe == "." else f"{recipe} "
        note = (
            f"trtls route {command}: note: `{command} NAME --recipe R` is deprecated; write "
            f"`trtls route {command} {where}--route {route or 'NAME'}{tail}`"
        )
    return recipe, route, step, note


def _names_a_recipe(word: str) -> bool:
    from pathlib import Path

    return word.endswith(".toml") or "/" in word or word in (".", "..") or Path(word).is_dir()


def _lifecycle_route(args: Any) -> tuple[Any, list[str]] | int:
    """The loaded recipe and the routes a lifecycle command acts on (status: every route unless --route names one;
    the others: the named route, else the only one), or the exit code of bad input (said on stderr)."""
    got = lifecycle_words(args)
    if isinstance(got, str):
        print(got, file=sys.stderr)
        emit_error(USAGE, got)
        return EXIT_BAD_INPUT
    recipe, name, step, note = got
    if note is not None:
        print(note, file=sys.stderr)
    args.step = step
    loaded = load_route_recipe(recipe)
    if not loaded.text:
        return report_recipe_unread(loaded)
    if loaded.recipe is None:
        for f in loaded.in_file_order(loaded.errors)[:10]:
            report_finding(loaded, f)
        return EXIT_BAD_INPUT
    wanted = chosen_or_exit(loaded, name, none_means_all=getattr(args, "lifecycle", "status") == "status")
    return wanted if isinstance(wanted, int) else (loaded, wanted)


def _emit(args: Any, payload: dict[str, Any], lines: list[str]) -> None:
    import json

    if getattr(args, "format", "text") == "json":
        print(json.dumps(payload, indent=2, default=str))
    else:
        print("\n".join(lines))


def _outcome_exit(args: Any, outcome: Any) -> int:
    lines = [outcome.message]
    lines += [f"  missing: {r['item']}: {r['reason']}" for r in outcome.refused if r["item"] != "ledger"]
    lines += [f"  {a}" for a in outcome.advice]
    _emit(args, outcome.as_dict(), lines)
    if outcome.ok:
        return EXIT_OK
    tampered = any(r["item"] == "ledger" for r in outcome.refused) or "tampered" in outcome.message
    return EXIT_REJECT if tampered else EXIT_HOLD


def cmd_route_promote(args: Any) -> int:
    """Exit 0 promoted (or already), 3 refused (an item missing or not current), 4 the ledger is tampered, 2 bad
    input."""
    from trtls.core.route import route_model
    from trtls.gates.lifecycle.promotion import promote

    got = _lifecycle_route(args)
    if isinstance(got, int):
        return got
    loaded, (name,) = got
    return _outcome_exit(args, promote(loaded, name, route_model(loaded, name), approver=args.approver))


def cmd_route_canary(args: Any) -> int:
    """Exit 0 recorded, 3 refused (wrong step, a watched figure missing), 4 tampered ledger, 2 bad input."""
    from trtls.core.route import route_model
    from trtls.gates.lifecycle.status import canary

    got = _lifecycle_route(args)
    if isinstance(got, int):
        return got
    loaded, (name,) = got
    figures: dict[str, Any] = {}
    given: dict[str, str] = {}  # each figure as typed
    for item in args.figure or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            report_command_error("route canary", USAGE, f"--figure takes NAME=VALUE, not {item!r}")
            return EXIT_BAD_INPUT
        if key.strip() in given:  # two values of one figure: neither is taken for the other (the last won)
            report_command_error(
                "route canary",
                USAGE,
                f"--figure {key.strip()!r} is given twice ({given[key.strip()]!r} and {value.strip()!r}): give each "
                "figure once",
            )
            return EXIT_BAD_INPUT
        given[key.strip()] = value.strip()
        try:
            figures[key.strip()] = float(value)
        except ValueError:
            figures[key.strip()] = value.strip()
    outcome = canary(loaded, name, route_model(loaded, name), args.step, figures, approver=args.approver)
    return _outcome_exit(args, outcome)


def cmd_route_rollback(args: Any) -> int:
    """Exit 0 the pointer moved, 3 refused (nothing to roll back to, its file is gone), 4 tampered, 2 bad input."""
    from trtls.core.route import route_model
    from trtls.gates.lifecycle.status import rollback

    got = _lifecycle_route(args)
    if isinstance(got, int):
        return got
    loaded, (name,) = got
    outcome = rollback(loaded, name, route_model(loaded, name), approver=args.approver, reason=args.reason)
    return _outcome_exit(args, outcome)


STATUS_EXIT = {
    "valid": EXIT_OK,
    "not_promoted": EXIT_FAILED,
    "revalidate": EXIT_HOLD,
    "canary_failed": EXIT_REJECT,
    "tampered": EXIT_REJECT,
}


def cmd_route_status(args: Any) -> int:
    """Exit 0 every route shown is promoted and valid; 1 one is not promoted; 3 one must be revalidated; 4 a canary
    failed or the ledger is tampered; 2 bad input (the worst of the routes shown)."""
    from trtls.core.route import route_model
    from trtls.gates.lifecycle.status import route_status

    got = _lifecycle_route(args)
    if isinstance(got, int):
        return got
    loaded, names = got
    statuses = [route_status(loaded, n, route_model(loaded, n)) for n in names]
    lines = []
    for st in statuses:
        lines.append(f"route {st.route}: {st.message}")
        lines += [f"  revalidate: {r}" for r in st.reasons]
        if st.canary_figures:
            lines.append("  canary figures: " + ", ".join(f"{k}={v}" for k, v in st.canary_figures.items()))
        lines += [f"  {a}" for a in st.advice]
    _emit(args, {"routes": [st.as_dict() for st in statuses]}, lines)
    return max((STATUS_EXIT[st.state] for st in statuses), default=EXIT_OK)
