"""`trtls route build`: the terminal face of `trtls.route.build.build_route` (live tree, Ctrl-C, exit codes), and
`trtls route lock`: the only writer of trtls.lock.json (`checkpoint.lock.lock_route`)."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from trtls.bundle import BundleError, sidecar_path
from trtls.cli.common import emit_finding, install_stop_keys, report_command_error, report_error, report_finding
from trtls.cli.exits import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK, EXIT_REJECT, exit_code_of
from trtls.cli.usage import JsonErrors, emit_error
from trtls.core.cancel import CancelToken
from trtls.route.build import RouteBuildError, build_route, load_route_recipe


class _RouteStop:
    """The route build's one stop, whatever step it is in: its token, which the steps before the engine build (the
    checkpoint read, the export, a conversion) and the bundle step after it check, and which the engine build takes
    as its own cancel while it runs (`route.build`: `token.on_request(build.cancel)`). A second Ctrl-C forces the
    engine build while it runs (skips its grace); before it and after it there is no worker to force, so it is one
    more request."""

    def __init__(self, token: CancelToken) -> None:
        self.token = token
        self.build: Any = None  # the engine build, once it has started

    def cancel(self, source: str) -> bool:
        return self.token.request(source)

    def force(self) -> None:
        if self.build is not None and self.build.running:
            self.build.force()
        else:
            self.token.request("ctrl_c")


def route_stop_words(stop: _RouteStop, name: str) -> Any:
    """The words of the route build's stop once its engine build has started: the build's (`store_lookup.stop_words`:
    the cooperative stop while it runs), then, once it is built, the bundle step's (what a stop there stops)."""
    from trtls.cli.store_lookup import stop_words

    def bundle_step(source: str) -> str | None:
        if source != "ctrl_c":
            return None
        return (
            f"{stop.build.engine} is built already; stopping route {name}'s bundle step "
            "(a bundle is written whole or not at all)…"
        )

    return stop_words(stop.build, then=bundle_step)


def chosen_or_exit(loaded: Any, name: str | None, *, none_means_all: bool = False) -> list[str] | int:
    """The routes a route command acts on (`core.route.chosen_routes`), or EXIT_BAD_INPUT once the reason they cannot
    be chosen (TRT107) is said on stderr after the recipe's path."""
    from trtls.core.route import chosen_routes

    chosen = chosen_routes(loaded, name, none_means_all=none_means_all)
    if isinstance(chosen, str):
        code, _, message = chosen.partition(" ")  # "TRT107 …"
        report_error(code, message, str(loaded.path))
        return EXIT_BAD_INPUT
    return chosen


def report_recipe_unread(loaded: Any) -> int:
    """A route command's recipe that could not be read (missing, a folder, unreadable): TRT104 on its path."""
    report_error("TRT104", "recipe file not found or unreadable", str(loaded.path))
    return EXIT_BAD_INPUT


def _print_json(record: dict[str, Any]) -> None:
    import json

    print(json.dumps(record, default=str), file=JsonErrors.out or sys.stdout, flush=True)


def cmd_route_build(args: Any) -> int:
    """Exit codes: 0 bundle written, 1 build failed, 2 bad input, 4 gate 1 refuses the checkpoint, 130 cancelled
    (Ctrl-C), 137 forced/killed."""

    from trtls.cli.terminal_view import PlainView, RichView, print_outcome

    loaded = load_route_recipe(args.recipe or ".")
    if not loaded.text:
        return report_recipe_unread(loaded)
    chosen = chosen_or_exit(loaded, args.route)
    if isinstance(chosen, int):
        return chosen
    name = chosen[0]
    from trtls.core.write_policy import route_write_findings

    for f in route_write_findings(loaded, name)[:1]:  # the path policy first: bad input, before gate 1 reads anything
        report_finding(loaded, f)
        return EXIT_BAD_INPUT
    refused = _preflight(loaded, name, args)
    if refused is not None:
        return refused
    from trtls.cli.terminal_view import JsonView

    as_json = bool(getattr(args, "json", False))
    view_cls = JsonView if as_json else (RichView if sys.stdout.isatty() else PlainView)
    stop = _RouteStop(CancelToken())

    async def run_route_build() -> Any:
        # One stop for every step (Ctrl-C, SIGTERM): the steps off the loop check the token, the engine build takes
        # it as its cancel; the words follow the step — the engine build's, then the bundle step's (on_build)
        keys = install_stop_keys(stop, f"route {name}")

        def on_build(build: Any) -> None:
            stop.build = build
            keys.bind(stop, route_stop_words(stop, name))

        return await build_route(
            loaded, name, view=view_cls, on_build=on_build, use_digest_cache=not args.no_digest_cache, cancel=stop.token
        )

    try:
        result = asyncio.run(run_route_build())
    except RouteBuildError as exc:
        line = col = None
        if exc.path and loaded.source_map is not None:
            try:
                rng = loaded.source_map.range(("routes", name) + tuple(exc.path), True)
                line, col = rng.start_line + 1, rng.start_col + 1
            except Exception:
                pass
        where = str(loaded.path) if line is None else f"{loaded.path}:{line}:{col}"
        print(f"{where}: trtls route build: {exc}", file=sys.stderr)
        # the route's own table refused (core.route.route_model, the build's first step): its findings, each on its
        # place, are the error records; anything else is the build's one error, coded where its text says a code
        own = loaded.in_file_order(f for f in loaded.errors if tuple(f.path[:2]) == ("routes", name))
        for f in own[:10]:
            emit_finding(loaded, f)
        if not own:  # TRT953: the route cannot be built as asked (docs/codes/route-life.md)
            code, message = _coded(str(exc), "TRT953")
            emit_error(code, message, file=str(loaded.path), line=line, col=col)
        return EXIT_BAD_INPUT
    except BundleError as exc:  # TRT412: the bundle cannot be written; the one there is whole (docs/codes/cleanup.md)
        report_command_error("route build", "TRT412", f"bundle not written: {exc}")
        return EXIT_FAILED
    except OSError as exc:  # TRT421: a file the build read or wrote (docs/codes/command-line.md)
        print(f"{loaded.path}: trtls route build: {exc.strerror or exc} ({exc.filename or ''})", file=sys.stderr)
        emit_error("TRT421", str(exc.strerror or exc), file=str(exc.filename or loaded.path))
        return EXIT_FAILED
    if as_json:  # the build's events and summary came as JSON lines (JsonView); the route's result is the last
        import dataclasses

        _print_json({"type": "route", **dataclasses.asdict(result)})
        return exit_code_of(result.outcome, result.cancel_source)
    if stop.build is not None:
        print_outcome(stop.build)
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


def _coded(text: str, default: str) -> tuple[str, str]:
    """(code, message) of an error whose text may start with its code (`TRT412 the bundle cannot be written …`);
    `default` when it does not."""
    import re

    found = re.match(r"(TRT\d{3}) (.*)", text, re.S)
    return (found.group(1), found.group(2)) if found else (default, text)


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
        said = f"gate 1 {c.status}s the checkpoint: {c.name}: {c.message}"
        print(f"{loaded.path}: {c.code} {level}: {said}", file=sys.stderr)
        emit_error(c.code, said, file=str(loaded.path), severity="warning" if forced else "error")
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
    from trtls.core.route import route_model, route_names

    loaded = load_route_recipe(args.recipe or ".")
    if not loaded.text:
        return report_recipe_unread(loaded)
    # an engine's ONNX that does not exist yet is what `trtls route build` writes: locking comes first (docs/gates.md)
    blocking = [f for f in loaded.errors if not (f.code == "TRT104" and tuple(f.path)[::2] == ("engines", "onnx"))]
    if blocking:
        for f in loaded.in_file_order(blocking)[:10]:
            report_finding(loaded, f)
        return EXIT_BAD_INPUT
    names = route_names(loaded)
    if not args.route and not names:  # nothing locked is not "locked": the TRT107 every route command says
        chosen = chosen_or_exit(loaded, None, none_means_all=True)
        assert isinstance(chosen, int)  # no route at all: nothing to choose
        return chosen
    wanted = args.route or names
    unknown = [n for n in wanted if n not in names]
    if unknown:
        report_error("TRT107", f"no route named {', '.join(unknown)} (routes: {', '.join(names)})", str(loaded.path))
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
            # TRT512: the checkpoint stays unlocked (docs/codes/gate-source.md)
            emit_error("TRT512", f"route {name}: not locked: {exc}", file=str(loaded.path))
            rc = EXIT_REJECT
            continue
        if getattr(args, "json", False):
            commit = entry["checkpoint"]["commit"]
            _print_json({"type": "locked", "route": name, "files": len(entry["files"]), "commit": commit})
        else:
            print(f"route {name}: locked {len(entry['files'])} files at commit {entry['checkpoint']['commit']}")
    return rc
