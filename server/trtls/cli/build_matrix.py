"""`trtls build --all`, `--matrix`, `--cell`, or a recipe with a `[cluster]`: one parent, one child per cell
(docs/farm.md), through the application layer (trtls.app.request_matrix), rendered in the terminal."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
from typing import Any

from trtls.cli import store_lookup
from trtls.cli.common import install_stop_keys, report_error
from trtls.cli.exits import EXIT_FAILED, EXIT_OK, exit_code_of
from trtls.cli.usage import JsonErrors


def say_matrices_left_out(loaded: Any, engines: list[str]) -> None:
    """--all builds each engine once with its own settings (--all --matrix builds every cell): a matrix it does
    not expand is said, not left out silently (issue 18)."""
    from trtls.builds.supervisor.matrix import plan

    for name in engines:
        cells = sum(1 for p in plan(loaded, [name], True, {}) if p.cell is not None)
        if cells:
            print(
                f"{name}: built once with its own settings; its [engines.{name}.matrix] ({cells} cells) was left out:"
                " add --matrix to build every cell",
                file=sys.stderr,
            )


async def build_matrix(loaded: Any, engines: list[str], args: argparse.Namespace, overrides: dict[str, Any]) -> int:
    """--all / --matrix / a recipe with [cluster]: one parent, one child per cell (docs/farm.md).
    With --json on a cluster, stdout carries only our JSON lines: Ray's driver prints its raylet's warnings to
    sys.stdout from a thread of its own (`(raylet) WARNING: 8 PYTHON worker processes …` under load, whatever
    log_to_driver says), so sys.stdout is lent to stderr for the run and the JSON goes to the real stdout."""
    json_out = sys.stdout
    if args.json and loaded.recipe.cluster is not None:
        JsonErrors.out = json_out
        with contextlib.redirect_stdout(sys.stderr):
            try:
                return await _run_matrix(loaded, engines, args, overrides, json_out)
            finally:
                from trtls.builds.farm import cluster

                cluster.disconnect()  # Ray's printing thread ends while stdout is still lent (atexit: a no-op)
    return await _run_matrix(loaded, engines, args, overrides, json_out)


async def _run_matrix(
    loaded: Any, engines: list[str], args: argparse.Namespace, overrides: dict[str, Any], json_out: Any
) -> int:
    """Every cell through the application layer (trtls.app.request_matrix), rendered in the terminal."""
    from trtls.app.matrix import request_matrix
    from trtls.app.results import Refused
    from trtls.builds.supervisor.supervisor import Supervisor
    from trtls.cli.matrix_view import MatrixJsonView, MatrixPlainView, MatrixRichView, print_matrix_outcome

    not_restored: list[str] = []  # a cell of a built key with no engine (its leader's was not stored)
    keys = install_stop_keys(None, "every cell", quiet=args.json)  # before a cell's job goes (cli/common.StopKeys)
    result = await keys.request_until_stopped(
        request_matrix(
            Supervisor(),
            loaded,
            engines,
            (args.engine or "all") + (" (matrix)" if args.matrix else ""),
            matrix=bool(args.matrix),
            cell=args.cell,
            overrides=overrides,
            no_store=bool(args.no_store),
            rebuild=bool(args.rebuild),
            say=None if args.json else store_lookup.say,
            # a hit cell costs no worker, no node
            on_looked_up=lambda warnings, reused: store_lookup.say_cells_looked_up(
                warnings, [(p, summary.record()) for p, summary in reused], as_json=args.json
            ),
            on_follower=store_lookup.follower_said(not_restored, quiet=args.json),
        )
    )
    if result is None:
        return keys.said_stopped("build")
    if isinstance(result, Refused):
        return store_lookup.report_refused(loaded, Refused(result.because, result.findings))  # warnings: said
    mb = result.matrix
    if mb is None:
        return EXIT_OK  # every cell was up to date
    # once every cell has ended, a stop says what it still cuts (their engines' upload), never that cells stop
    keys.bind(mb, store_lookup.stop_words(mb, args.timeout))
    loop = asyncio.get_running_loop()
    if args.timeout:
        loop.call_later(args.timeout, keys.stop, "ci_timeout")
    view_cls = MatrixJsonView if args.json else (MatrixRichView if sys.stdout.isatty() else MatrixPlainView)
    view = MatrixJsonView(mb, json_out) if args.json else view_cls(mb)
    mb.listeners.append(view.update)
    with view:
        while mb.running:
            await asyncio.sleep(0.25)
            view.tick()
        await mb.wait()
    if not args.json:
        print_matrix_outcome(mb, said=result.warnings)
    code = exit_code_of(mb.outcome, mb.cancel_source)
    if code == EXIT_OK and not_restored:
        report_error("TRT332", f"not built: {', '.join(not_restored)} (see above)", str(loaded.path))
        return EXIT_FAILED
    return code
