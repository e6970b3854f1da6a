"""The `trtls` program's entry: an unchanged `trtls build [RECIPE] --engine NAME [--json]` is answered from the
engine store before the command line's parser and its subcommands (argparse, asyncio, every face's module: ~80 ms)
are imported; anything else — another command, another flag, a miss — goes to `trtls.cli.main`, which parses it
as always. The fast path's own rules (what must be unchanged, when it declines) are in builds/avoidance/reuse.py
(`fast_hit`); this module only decides whether a command line is one it may answer, and starts such a build's worker
first of all — parked until the fast path knows it builds (builds/supervisor/worker_launch.py). `trtls serve` goes
straight to the language server, for the same reason (initialize from spawn)."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import argparse  # at run time only once a command line is one to answer here, after a certain build's spawn

# the only flags an unchanged build may carry here; any other word (a typo included) goes to the real parser.
# `--no-store` and `--rebuild` are builds for certain: the fast path starts their worker (builds/supervisor/
# speculation.py) and declines, and the real parser takes the command line as always
_VALUED = ("--engine",)
_BARE = {"--json": "json", "--no-store": "no_store", "--rebuild": "rebuild"}


def simple_build(argv: list[str]) -> argparse.Namespace | None:
    """`build [RECIPE] --engine NAME [--json] [--no-store] [--rebuild]` as the namespace `cli.main` would make of it,
    or None."""
    words = simple_words(argv)
    return None if words is None else _namespace(words)


def simple_words(argv: list[str]) -> dict[str, str | bool | None] | None:
    """`simple_build`'s reading of the command line, before `argparse` is imported (a certain build's worker starts
    from it: `_command`), or None."""
    if not argv or argv[0] != "build":
        return None
    engine, recipe = None, None
    bare: dict[str, str | bool | None] = dict.fromkeys(_BARE.values(), False)
    words = iter(argv[1:])
    for word in words:
        if word in _BARE:
            bare[_BARE[word]] = True
        elif word in _VALUED:
            engine = next(words, None)
            if engine is None or engine.startswith("-"):
                return None
        elif word.startswith("--engine="):
            engine = word.split("=", 1)[1]
        elif word.startswith("-") or recipe is not None:
            return None  # another flag, `--` or a second positional: the real parser decides
        else:
            recipe = word
    if not engine:
        return None
    return {"engine": engine, "recipe": recipe, **bare}


def _namespace(words: dict[str, str | bool | None]) -> argparse.Namespace:
    import argparse

    return argparse.Namespace(
        command="build",
        all=False,
        matrix=False,
        cell=None,
        cold=False,
        optimization_level=None,
        unpin=False,
        no_wait=False,
        timeout=None,
        **words,
    )


def main(argv: list[str] | None = None) -> int:
    given, argv = argv, sys.argv[1:] if argv is None else argv
    # The first pydantic model a process makes scans every installed distribution's entry points for pydantic plugins
    # (on the 16-core host's Python, with torch and its kin installed: ~56 ms of the recipe's check, a build's critical
    # path). trtls's own models want none; a PYDANTIC_DISABLE_PLUGINS the person set is theirs.
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    from trtls.core.pydantic_plugins import defer_plugin_loader

    defer_plugin_loader()  # and pydantic's loader is not imported only to read that (core/pydantic_plugins.py)
    if argv in (["serve"], ["serve", "--stdio"]):
        return _serve()
    try:
        return _command(given, argv)
    finally:
        _remember_snapshots(False)


def _remember_snapshots(on: bool) -> None:
    """One command: each version of a recipe read once, whoever asks (core.recipe_file.recipe_snapshot). Turned on
    after a worker started ahead is spawned: nothing of the recipe's readers is imported before that spawn."""
    from trtls.core.recipe_file import remember_snapshots

    remember_snapshots(on)


def _command(given: list[str] | None, argv: list[str]) -> int:
    words = simple_words(argv)
    if words is None:
        _remember_snapshots(True)
        return _full(given, argv)
    certain, warming = bool(words["no_store"] or words["rebuild"]), None
    try:  # from here a Ctrl-C is the person's stop (`_interrupted`), with a worker started ahead dropped
        from trtls.builds.supervisor.worker_launch import drop_ahead, start_ahead

        # Its worker starts first of all, before argparse and the door's process rules: a build for certain starts at
        # once; one the store may serve starts parked (no builder loaded) until the fast path knows it builds, and is
        # dropped otherwise (builds/supervisor/worker_launch.py)
        start_ahead(parked=not certain)
        args = _namespace(words)
        _remember_snapshots(True)
        from trtls.builds.cuda import device_fingerprint, warm_driver

        # The memo's last check is the device. Where the driver's own files say it (device_fingerprint), that is a few
        # small reads; elsewhere it is a cuInit (a process's first: ~0.2 s with a GPU, ctypes releases the GIL), probed
        # from now on, beside the fast path's imports and hashes, and joined before this process ends. A certain build
        # (--no-store, --rebuild) asks no memo for a hit: its worker started first, and the key's device is cli.main's.
        warming = warm_driver() if not certain and device_fingerprint() is None else None
        from trtls.cli.console import exit_code, safe_console
        from trtls.cli.store_lookup import fast_path

        with safe_console() as out:
            done = fast_path(args, entry=True)
        drop_ahead()  # a worker started ahead that the fast path did not take (a hit, a decline) ends unused now
        return exit_code(out, "build", done) if done is not None else _full(given, argv, args)
    except KeyboardInterrupt:
        # the user's stop, even this early (the fast path's imports, its hashes, a restore): nothing is built, and a
        # restore is atomic (its temp is the door's to clean), so the output is as it was — never build after it. A
        # worker the fast path started, and perhaps sent the last build's job, ends now (it wrote nothing)
        from trtls.cli.store_lookup import drop_started

        drop_started()
        return _interrupted(argv)
    finally:
        from trtls.builds.supervisor.worker_launch import drop_ahead  # (again: a Ctrl-C may have cut the first import)

        drop_ahead()  # a worker started ahead that nobody took (a Ctrl-C, a failure) ends without building
        if warming is not None:
            warming.settle()  # its answer, or the driver's bound passed (a cuInit that hangs: builds/cuda.py)


def _full(given: list[str] | None, argv: list[str], parsed: argparse.Namespace | None = None) -> int:
    """`parsed`: the simple build this module already read, so cli.main makes no parser for it (the full command line's
    parser, every subcommand's: ~40 ms here, on the recipe check's path); tests/test_cli_entry.py holds it equal to
    what the parser makes of the same words."""
    try:
        from trtls.cli.main import main as full

        return full(given, parsed)  # None: the program's own call (cli.main then ends a build without the teardown)
    except KeyboardInterrupt:
        # Ctrl-C before a command's own stop is in place (importing the command line's modules, making its parser):
        # nothing was written yet; a worker the fast path started, perhaps sent a job it holds (`check_ahead`), ends
        # now. The same line and code as cli.main's net, not a traceback.
        from trtls.cli.store_lookup import drop_started

        drop_started()
        return _interrupted(argv)


def _interrupted(argv: list[str]) -> int:
    from trtls.cli.exits import say_interrupted

    return say_interrupted(argv[0] if argv else "")  # a command's name, never other text


def _serve() -> int:
    """`trtls serve [--stdio]` straight to the language server: an editor waits for initialize's reply from the moment
    it spawns the process, and the command line's parser and every other command's module (~0.1 s) serve no part of
    it. The same Ctrl-C line and code as `cli.main` gives."""
    from trtls.cli.exits import say_interrupted
    from trtls.lsp.server import serve

    try:
        return serve()  # the protocol's exit code: 0 after shutdown, 1 without
    except KeyboardInterrupt:
        return say_interrupted("serve")
