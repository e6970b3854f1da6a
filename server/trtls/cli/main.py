"""`trtls` command line: build, serve, info, schema; check, import, gates, bundle, route, accept, pictures register
themselves (`SUBCOMMANDS`).

Exit codes of `trtls build`: 0 built, 1 failed, 2 bad input, 124 cancelled by --timeout,
130 cancelled by Ctrl-C, 137 forced or killed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

from trtls import __version__
from trtls.cli import accept, build_matrix, check, gates, import_cmd, pictures, reduce, store, store_lookup
from trtls.cli import farm as farm_cmd
from trtls.cli import gc as gc_cmd
from trtls.cli.common import find_recipe, install_stop_keys, load_or_report
from trtls.cli.console import exit_code, safe_console
from trtls.cli.exits import EXIT_BAD_INPUT, EXIT_OK, exit_code_of, say_interrupted
from trtls.cli.usage import JsonErrors, TrtlsParser, output_file, parse, positive_seconds, recipe_argument


def cmd_build(args: argparse.Namespace) -> int:
    fast = store_lookup.fast_path(args)  # unchanged since the last run and in the store: no recipe models
    if fast is not None:
        return fast
    code = asyncio.run(_build_all(args))
    if _as_program and reduce.started_as_trtls():
        # Every record is durable by now (evidence, history, the store's publish: each written atomically and
        # fsynced before the build's end resolved) and asyncio.run has joined its executor threads (retention's pass):
        # what a normal exit would add is the teardown of pydantic's models and every module the build loaded (~30–50
        # ms a person waits for). The same end as a build reduction's (`reduce.exit_promptly`: atexit hooks, streams
        # flushed; a thread still running or a stream that cannot be flushed keeps the normal exit).
        reduce.exit_promptly(code)
    return code


async def _build_all(args: argparse.Namespace) -> int:
    from trtls.builds.supervisor.retry import retry_overrides
    from trtls.builds.supervisor.spawn import adopt_started, discard, preload_for, spawn_worker, store_may_serve

    # The worker starts first and imports TensorRT while this process loads and checks the recipe (one local
    # build; a matrix or a cluster places its own workers).
    farm = args.all or args.matrix or args.cell
    # A build the store may serve looks up first: a hit must start no worker (and import no TensorRT). One whose key
    # the fast path already found missing from the store (its memo held) builds: its worker starts now.
    servable = not store_lookup.known_miss and store_may_serve(find_recipe(args.recipe), args.no_store, args.rebuild)
    # A known miss started its worker already, in the fast path, and (an unchanged recipe) sent it this build's job:
    # TensorRT builds while this process checks the recipe; the engine is written only if the checked job is the same
    # (builds/supervisor/speculation.py).
    started, early, ahead = store_lookup.take_started(), None, None
    if started is not None:
        early, ahead = await adopt_started(started.worker), started.ahead
    else:
        preload = None if farm or servable else preload_for(find_recipe(args.recipe), args.engine)
        early = await spawn_worker(preload=preload) if preload is not None else None
    # The key's device probe, beside the recipe's load (made by the fast path with its check, if it checked). A matrix
    # (a farm run's included: its cells are keyed here) or every engine asks the account's probe: a cuInit would also
    # cost the command ~60 ms at its exit on a GPU host.
    if started is not None and started.checked is not None:
        warming = started.warming
    else:
        warming = store_lookup.key_device_probe(find_recipe(args.recipe).parent, None if farm else args.engine)
    try:
        # the request's one recipe check: made here, or by the fast path before it sent its job ahead
        loaded = load_or_report(args.recipe, started.checked if started is not None else None)
        if loaded is None:
            return EXIT_BAD_INPUT
        from trtls.app.request import refused_recipe, runs_as_matrix

        engines = [args.engine] if args.engine and not args.all else list(loaded.recipe.engines)
        if not loaded.recipe.engines and (refused := refused_recipe(loaded, engines)) is not None:
            return store_lookup.report_refused(loaded, refused)
        gc_cmd.recover_before_build(loaded.path, quiet=args.json)  # evidence of builds whose supervisor was killed
        if (refused := refused_recipe(loaded, engines)) is not None:
            return store_lookup.report_refused(loaded, refused)
        if args.all and not args.matrix:
            build_matrix.say_matrices_left_out(loaded, engines)
        overrides: dict[str, Any] = {}
        if args.cold:
            overrides.update(retry_overrides("cold", 0))
        if args.optimization_level is not None:
            overrides["settings"] = {"optimization_level": args.optimization_level}
        if runs_as_matrix(loaded, every_engine=args.all, matrix=args.matrix, cell=args.cell):
            await discard(early)
            return await build_matrix.build_matrix(loaded, engines, args, overrides)
        code = EXIT_OK
        for engine in engines:
            worker, early = early, None
            code = await _build_one(loaded, engine, args, overrides, worker, ahead)
            ahead = None
            if code != EXIT_OK:
                break
        return code
    finally:
        await discard(early)  # an early worker no build took (a refused recipe): ended at once
        if warming is not None:
            await asyncio.to_thread(warming.settle)  # quick by now: prepare's probe waited for the same cuInit


async def _build_one(
    loaded: Any,
    engine: str,
    args: argparse.Namespace,
    overrides: dict[str, Any],
    worker: Any = None,
    ahead: Any = None,
) -> int:
    """One engine through the application layer (trtls.app.request_build), rendered in the terminal. `ahead`: the
    job `worker` was sent before the recipe was checked (builds/supervisor/speculation.py)."""
    from trtls.app.build import request_build
    from trtls.app.results import AlreadyBuilding, Refused, Reused
    from trtls.builds.supervisor.spawn import discard

    # The stop keys first: this request's job may reach `worker` before the request returns (a checked job goes before
    # the lookup), and from then a Ctrl-C is this build's stop, with its evidence (cli/common.StopKeys)
    keys = install_stop_keys(None, engine, quiet=args.json)
    try:
        result = await keys.request_until_stopped(
            request_build(
                None,  # a supervisor of its own, made only when a build starts: a store hit loads no build core
                loaded,
                engine,
                overrides=overrides,
                no_store=bool(args.no_store),
                rebuild=bool(args.rebuild),
                unpin=bool(args.unpin),
                worker=worker,  # started early, importing TensorRT; closed there when no build starts
                ahead=ahead,
                wait_for_output=not args.no_wait,
                say=None if args.json else store_lookup.say,
                on_wait=(lambda holder: store_lookup.json_waiting(engine, holder)) if args.json else None,
                on_warning=None if args.json else store_lookup.say_warning,
            )
        )
    except BaseException:
        await asyncio.shield(discard(worker))  # ended unless a build took it (then its own: spawn.taken_by_build)
        raise
    if result is None:  # stopped before a build started
        await discard(worker)
        return keys.said_stopped("build")
    if isinstance(result, Reused):
        store_lookup.say_lookup(engine, result.use, quiet=args.json)
        return store_lookup.print_reused(engine, result.summary.record(), loaded.path, bool(args.json))
    if isinstance(result, Refused):
        return store_lookup.report_refused(loaded, result)
    assert not isinstance(result, AlreadyBuilding)  # the terminal keeps no registry of running builds
    from trtls.cli.terminal_view import JsonView, PlainView, RichView, print_outcome

    store_lookup.say_lookup(engine, result.use, quiet=args.json, building=True)
    build = result.build
    # a stop asked meanwhile is applied now; one asked after the build has ended says what it still cuts
    keys.bind(build, store_lookup.stop_words(build, args.timeout))
    loop = asyncio.get_running_loop()
    if args.timeout is not None:
        loop.call_later(args.timeout, keys.stop, "ci_timeout")
    view_cls = JsonView if args.json else (RichView if sys.stdout.isatty() else PlainView)
    view = view_cls(build)
    build.listeners.append(view.update)
    ended = asyncio.ensure_future(build.ended())  # wakes the loop when the evidence is written, not at its next tick
    with view:
        while build.running:
            await asyncio.wait([ended], timeout=0.125)
            view.tick()
        await build.wait()
    if not args.json:
        print_outcome(build)
    return exit_code_of(build.state.outcome, build.state.token.source)


def cmd_serve(args: argparse.Namespace) -> int:
    from trtls.core.recipe_file import remember_snapshots
    from trtls.lsp.server import serve

    remember_snapshots(False)  # a one-shot command's, never the server's: its life outlasts edits (core.recipe_file)
    return serve()


def cmd_info(args: argparse.Namespace) -> int:
    """Exit 0 when a builder module was found, 1 when not (the text says why)."""
    from trtls.debug_info import as_text, debug_information

    info = debug_information()
    print(json.dumps(info, indent=2) if args.json else as_text(info))
    return 1 if "error" in info["builder"] else 0


def cmd_schema(args: argparse.Namespace) -> int:
    from trtls.core.recipe import recipe_json_schema

    text = json.dumps(recipe_json_schema(), indent=2)
    if args.output:
        from trtls.cli.output import write_output

        # no recipe is loaded: the recipe of the current folder and of the file's own folder are judged
        return write_output(args.output, text + "\n", fmt="json", recipes=(find_recipe(None),)) or EXIT_OK
    print(text)
    return EXIT_OK


BUILD_EXITS = (
    "exit codes: 0 built, 1 failed, 2 bad input, 124 cancelled by --timeout, 130 cancelled by Ctrl-C, "
    "137 forced or killed"
)


# each registers its parser; the heavy machinery is imported only when its command runs
SUBCOMMANDS = (
    check.register,
    import_cmd.register,
    gates.register,
    accept.register,
    pictures.register,
    store.register,
    reduce.register,
    gc_cmd.register,
    farm_cmd.register,
)


def make_parser() -> argparse.ArgumentParser:
    parser = TrtlsParser(prog="trtls", description="TensorRT builds you can watch, stop and trust.")
    parser.add_argument("--version", action="version", version=f"trtls {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    b = sub.add_parser("build", help="build engines from a trtls.toml with a live phase tree", epilog=BUILD_EXITS)
    recipe_argument(b)
    b.add_argument("--engine", help="engine table to build (default: all, in order)")
    b.add_argument(
        "--timeout",
        type=positive_seconds,
        metavar="SECONDS",
        help="cancel with source ci_timeout after this many seconds (> 0; default: no timeout)",
    )
    b.add_argument(
        "--json", action="store_true", help="stream events as JSON lines, the summary last; errors as JSON lines too"
    )
    b.add_argument("--cold", action="store_true", help="ignore the timing cache for this build (retry cold)")
    b.add_argument(
        "--optimization-level", type=int, choices=range(6), help="override the builder optimization level (diagnosis)"
    )
    b.add_argument("--all", action="store_true", help="every engine as one run (side by side on a [cluster])")
    b.add_argument("--matrix", action="store_true", help="every cell of the engine's [engines.NAME.matrix]")
    b.add_argument("--cell", help="one matrix cell by name (e.g. o0-SM89)")
    b.add_argument(
        "--no-wait", action="store_true", help="fail (TRT410) instead of waiting when another build holds the output"
    )
    b.add_argument("--rebuild", action="store_true", help="build even when the engine store holds this engine")
    b.add_argument("--no-store", action="store_true", help="neither look up nor publish in the engine store")
    b.add_argument(
        "--unpin",
        action="store_true",
        help="remove the pin a `trtls rollback` left and build the recipe's engine (recorded in the evidence)",
    )
    b.set_defaults(func=cmd_build)

    s = sub.add_parser("serve", help="run the language server (stdio)", epilog="exit codes: 0 after the client's exit")
    # Most LSP client configurations pass --stdio (vscode-languageclient, Neovim, Helix, Zed, eglot examples);
    # stdio is the only transport, so the flag is accepted and means what serve does anyway.
    s.add_argument("--stdio", action="store_true", help="talk LSP over stdin/stdout (the default and only transport)")
    s.set_defaults(func=cmd_serve)

    i = sub.add_parser(
        "info",
        help="versions and the builder module a build would use (paste into bug reports)",
        epilog="exit codes: 0 a builder module is usable, 1 none is (the text says why)",
    )
    i.add_argument("--json", action="store_true", help="print the same information as one JSON object")
    i.set_defaults(func=cmd_info)

    sc = sub.add_parser(
        "schema", help="print (or write) the JSON Schema of trtls.toml", epilog="exit codes: 0 printed or written"
    )
    sc.add_argument(
        "-o", "--output", type=output_file, help="write the schema to this file (atomically) instead of stdout"
    )
    sc.set_defaults(func=cmd_schema)

    for register in SUBCOMMANDS:
        register(sub)
    return parser


_as_program = False  # main() with no argv: the `trtls` program's own call, not a caller's main([...])


def main(argv: list[str] | None = None, parsed: argparse.Namespace | None = None) -> int:
    """Every command but `serve` (its stdout is the JSON-RPC wire) prints through `cli.console`: each line a person
    reads is escaped there, once, whatever printed it (issue 27, item 13). `parsed`: a `build` command line cli.entry
    already read (`entry.simple_build`), run without making the parser."""
    global _as_program
    _as_program = argv is None
    with safe_console() as out:
        args = parse(make_parser(), argv) if parsed is None else _simple_build(parsed)
        code = None if args.command == "serve" else _run(args)
    return _run(args) if code is None else exit_code(out, args.command, code)


def _simple_build(parsed: argparse.Namespace) -> argparse.Namespace:
    JsonErrors.enabled = parsed.json  # as `parse` sets it from the words
    return argparse.Namespace(**vars(parsed), func=cmd_build)


def _run(args: argparse.Namespace) -> int:
    try:
        return args.func(args)
    except KeyboardInterrupt:
        # The safety net for a command with no stop of its own (build, matrix, route build, gates and reduce have
        # theirs: a cooperative stop, evidence, 130). Every file trtls writes is a temp file until its rename, so an
        # interrupted write replaced nothing; the user gets one line and 130, not a traceback.
        return say_interrupted(args.command)


if __name__ == "__main__":
    sys.exit(main())
