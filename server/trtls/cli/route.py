"""`trtls route build`: the terminal face of `trtls.route.build.build_route` (live tree, Ctrl-C, exit codes), and
`trtls route lock`: the only writer of trtls.lock.json (`checkpoint.lock.lock_route`)."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from trtls.bundle import BundleError, sidecar_path
from trtls.cli.common import install_stop_keys
from trtls.cli.exits import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK, EXIT_REJECT, exit_code_of
from trtls.route.build import RouteBuildError, build_route, load_route_recipe


def cmd_route_build(args: Any) -> int:
    """Exit codes: 0 bundle written, 1 build failed, 2 bad input, 130 cancelled (Ctrl-C), 137 forced/killed."""

    from trtls.cli.terminal_view import PlainView, RichView, print_outcome
    from trtls.core.route import route_names

    loaded = load_route_recipe(args.recipe or ".")
    if not loaded.text:
        print(f"{loaded.path}: TRT104 recipe file not found or unreadable", file=sys.stderr)
        return EXIT_BAD_INPUT
    names = route_names(loaded)
    name = args.route or (names[0] if len(names) == 1 else None)
    if name is None or name not in names:
        print(
            f"{loaded.path}: TRT107 choose a route with --route (routes: {', '.join(names) or 'none'})", file=sys.stderr
        )
        return EXIT_BAD_INPUT
    holder: dict[str, Any] = {}

    def on_build(build: Any) -> None:
        holder["build"] = build
        install_stop_keys(build, build.engine)

    view_cls = RichView if sys.stdout.isatty() else PlainView
    try:
        result = asyncio.run(
            build_route(loaded, name, view=view_cls, on_build=on_build, use_digest_cache=not args.no_digest_cache)
        )
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


def cmd_route_lock(args: Any) -> int:
    """Exit 0 locked, 2 bad input, 4 a route cannot be locked as it is (nothing written for it)."""
    from trtls.checkpoint.lock import LockError, lock_route
    from trtls.core.route import route_names

    loaded = load_route_recipe(args.recipe or ".")
    if loaded.recipe is None:
        for f in loaded.errors[:10]:
            print(f"{loaded.location(f)}: {f.code} {f.message}", file=sys.stderr)
        return EXIT_BAD_INPUT
    names = route_names(loaded)
    wanted = args.route or names
    unknown = [n for n in wanted if n not in names]
    if unknown:
        print(
            f"{loaded.path}: TRT107 no route named {', '.join(unknown)} (routes: {', '.join(names)})", file=sys.stderr
        )
        return EXIT_BAD_INPUT
    rc = EXIT_OK
    for name in wanted:
        try:
            entry = lock_route(loaded, name, use_digest_cache=not args.no_digest_cache)
        except LockError as exc:
            print(f"{loaded.path}: route {name}: not locked: {exc}", file=sys.stderr)
            rc = EXIT_REJECT
            continue
        print(f"route {name}: locked {len(entry['files'])} files at commit {entry['checkpoint']['commit']}")
    return rc
