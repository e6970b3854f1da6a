"""`trtls route build`: the terminal face of `trtls.route.build.build_route` (live tree, Ctrl-C, exit codes), and
`trtls route lock`: the only writer of trtls.lock.json (`checkpoint.lock.lock_route`)."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from trtls.bundle import BundleError, sidecar_path
from trtls.cli.common import finding_line, install_stop_keys
from trtls.cli.exits import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_HOLD, EXIT_OK, EXIT_REJECT, exit_code_of
from trtls.core.cancel import CancelToken
from trtls.route.build import RouteBuildError, build_route, load_route_recipe


class _RouteSteps:
    """What Ctrl-C stops before a route's engine build starts (the checkpoint read, the export, a conversion): the
    route build's token. There is no worker to force yet, so a second Ctrl-C is one more request."""

    def __init__(self, token: CancelToken) -> None:
        self.token = token

    def cancel(self, source: str) -> bool:
        return self.token.request(source)

    def force(self) -> None:
        self.token.request("ctrl_c")


def chosen_or_exit(loaded: Any, name: str | None, *, none_means_all: bool = False) -> list[str] | int:
    """The routes a route command acts on (`core.route.chosen_routes`), or EXIT_BAD_INPUT once the reason they cannot
    be chosen (TRT107) is said on stderr after the recipe's path."""
    from trtls.core.route import chosen_routes

    chosen = chosen_routes(loaded, name, none_means_all=none_means_all)
    if isinstance(chosen, str):
        print(f"{loaded.path}: {chosen}", file=sys.stderr)
        return EXIT_BAD_INPUT
    return chosen


def cmd_route_build(args: Any) -> int:
    """Exit codes: 0 bundle written, 1 build failed, 2 bad input, 4 gate 1 refuses the checkpoint, 130 cancelled
    (Ctrl-C), 137 forced/killed."""

    from trtls.cli.terminal_view import PlainView, RichView, print_outcome

    loaded = load_route_recipe(args.recipe or ".")
    if not loaded.text:
        print(f"{loaded.path}: TRT104 recipe file not found or unreadable", file=sys.stderr)
        return EXIT_BAD_INPUT
    chosen = chosen_or_exit(loaded, args.route)
    if isinstance(chosen, int):
        return chosen
    name = chosen[0]
    from trtls.core.write_policy import route_write_findings

    for f in route_write_findings(loaded, name)[:1]:  # the path policy first: bad input, before gate 1 reads anything
        print(finding_line(loaded, f), file=sys.stderr)
        return EXIT_BAD_INPUT
    refused = _preflight(loaded, name, args)
    if refused is not None:
        return refused
    holder: dict[str, Any] = {}

    def on_build(build: Any) -> None:
        holder["build"] = build
        install_stop_keys(build, build.engine)

    view_cls = RichView if sys.stdout.isatty() else PlainView

    async def run_route_build() -> Any:
        # Ctrl-C and SIGTERM stop the steps before the engine build too (the checkpoint read, the export, a
        # conversion): they run off the loop and check this token; once the engine build starts, its own keys
        # (on_build) take over and the token is forwarded to it.
        token = CancelToken()
        install_stop_keys(_RouteSteps(token), f"route {name}")
        return await build_route(
            loaded, name, view=view_cls, on_build=on_build, use_digest_cache=not args.no_digest_cache, cancel=token
        )

    try:
        result = asyncio.run(run_route_build())
    except RouteBuildError as exc:
        where = ""
        if exc.path and loaded.source_map is not None:
            try:
                where = f"{loaded.path}:{loaded.source_map.range(('routes', name) + tuple(exc.path), True).human()}: "
            except Exception:
                where = f"{loaded.path}: "
        print(f"{where or str(loaded.path) + ': '}trtls route build: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except BundleError as exc:
        print(f"trtls route build: bundle not written: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except OSError as exc:
        print(f"{loaded.path}: trtls route build: {exc.strerror or exc} ({exc.filename or ''})", file=sys.stderr)
        return EXIT_FAILED
    if "build" in holder:
        print_outcome(holder["build"])
    print(f"\nroute {name}: {result.message}")
    if result.ok:
        print(f"  sidecar: {sidecar_path(result.bundle)}\n  sbom: {result.sbom}")
        if result.previous_bundle:
            print(
                f"  previous bundle: {result.previous_bundle} "
                f"({'kept from the replaced bundle' if result.previous_kept else 'unchanged'})"
            )
    for note in result.notes:
        print(f"  note: {note}")
    return exit_code_of(result.outcome, result.cancel_source)


def _preflight(loaded: Any, name: str, args: Any) -> int | None:
    """Gate 1's content checks before any export (`gates.source.build_preflight`): exit 4 on what refuses the build,
    unless `--unverified-checkpoint` asked to go on (then every refusal is printed as a warning, loudly)."""
    from trtls.core.route import route_model
    from trtls.gates.source import build_preflight

    try:
        route = route_model(loaded, name)
    except (KeyError, ValueError):
        return None  # the build reports the recipe's errors itself, located
    if route.from_export:  # no checkpoint for gate 1 to read: the build reads the shipped files (route.export_route)
        print(
            f"{loaded.path}: note: route {name} starts from an export: gate 1 has no checkpoint to read",
            file=sys.stderr,
        )
        return None
    refuse, warn = build_preflight(loaded, name, route, use_digest_cache=not args.no_digest_cache)
    for c in warn:
        print(
            f"{loaded.path}: {c.code} note: gate 1 {c.status.replace('_', ' ')}: {c.name}: {c.message}", file=sys.stderr
        )
    if not refuse:
        return None
    forced = bool(getattr(args, "unverified_checkpoint", False))
    for c in refuse:
        level = "WARNING (building anyway: --unverified-checkpoint)" if forced else "error"
        print(
            f"{loaded.path}: {c.code} {level}: gate 1 {c.status}s the checkpoint: {c.name}: {c.message}",
            file=sys.stderr,
        )
    if forced:
        return None
    print(
        f"route {name}: not built: gate 1 refuses the checkpoint (nothing exported or written; to build anyway for "
        "a test, pass --unverified-checkpoint)",
        file=sys.stderr,
    )
    return EXIT_REJECT


def cmd_route_lock(args: Any) -> int:
    """Exit 0 locked, 2 bad input, 4 a route cannot be locked as it is (nothing written for it)."""
    from trtls.checkpoint.lock import LockError, lock_route
    from trtls.core.route import chosen_routes, route_model, route_names

    loaded = load_route_recipe(args.recipe or ".")
    # an engine's ONNX that does not exist yet is what `trtls route build` writes: locking comes first (docs/gates.md)
    blocking = [f for f in loaded.errors if not (f.code == "TRT104" and tuple(f.path)[::2] == ("engines", "onnx"))]
    if not loaded.text or blocking:
        for f in blocking[:10]:
            print(finding_line(loaded, f), file=sys.stderr)
        return EXIT_BAD_INPUT
    names = route_names(loaded)
    if not args.route and not names:  # nothing locked is not "locked": the TRT107 every route command says
        print(f"{loaded.path}: {chosen_routes(loaded, None, none_means_all=True)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    wanted = args.route or names
    unknown = [n for n in wanted if n not in names]
    if unknown:
        print(
            f"{loaded.path}: TRT107 no route named {', '.join(unknown)} (routes: {', '.join(names)})", file=sys.stderr
        )
        return EXIT_BAD_INPUT
    rc = EXIT_OK
    for name in wanted:
        if route_model(loaded, name).from_export:  # nothing to lock: the bundle provenance pins the shipped files
            print(
                f"route {name}: nothing to lock: it starts from an export (no checkpoint); the sha256 of the files it "
                "ships are recorded in the bundle's provenance and compared by gate 3",
                file=sys.stderr,
            )
            continue
        try:
            entry = lock_route(loaded, name, use_digest_cache=not args.no_digest_cache)
        except LockError as exc:
            print(f"{loaded.path}: route {name}: not locked: {exc}", file=sys.stderr)
            rc = EXIT_REJECT
            continue
        print(f"route {name}: locked {len(entry['files'])} files at commit {entry['checkpoint']['commit']}")
    return rc


# -- a route's life: promote, status, canary, rollback (the rules are in trtls.gates.lifecycle; this only renders)


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
        return EXIT_BAD_INPUT
    recipe, name, step, note = got
    if note is not None:
        print(note, file=sys.stderr)
    args.step = step
    loaded = load_route_recipe(recipe)
    if loaded.recipe is None:
        for f in loaded.errors[:10]:
            print(finding_line(loaded, f), file=sys.stderr)
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
            print(f"trtls route canary: --figure takes NAME=VALUE, not {item!r}", file=sys.stderr)
            return EXIT_BAD_INPUT
        if key.strip() in given:  # two values of one figure: neither is taken for the other (the last won)
            print(
                f"trtls route canary: --figure {key.strip()!r} is given twice ({given[key.strip()]!r} and "
                f"{value.strip()!r}): give each figure once",
                file=sys.stderr,
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
