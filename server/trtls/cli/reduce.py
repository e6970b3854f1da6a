"""`trtls reduce`: reduce a failing engine build to the smallest model that still fails the same way
(docs/triage.md). One line per trial as it ends; Ctrl-C (or --timeout, --max-trials) stops after the current trial
is cancelled cooperatively and keeps the smallest failing model found so far.

Exit codes: 0 a cause was found (a minimal model, or the settings), 1 the failure did not reproduce, nothing
classified it, no smaller model fails the same way, the trial budget ran out before any smaller failing model, or the
reduction failed (its `error` says why), 2 bad input or a module the reduction needs is not installed (TRT982, with
the extra to install), 124 stopped by --timeout, 130 stopped by Ctrl-C.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import TYPE_CHECKING, Any

from trtls.cli.common import install_stop_keys, load_or_report, report_error
from trtls.cli.exits import EXIT_BAD_INPUT, EXIT_CTRL_C, EXIT_FAILED, EXIT_OK, EXIT_TIMEOUT
from trtls.cli.usage import positive_seconds
from trtls.core.terminal_text import terminal_safe
from trtls.triage import MAX_TRIALS

if TYPE_CHECKING:
    from trtls.app.triage_runs import ReductionRun
    from trtls.core.recipe import LoadedRecipe
    from trtls.core.triage_records import ReductionResult
    from trtls.triage.reduce_build import Reduction

EPILOG = (
    "exit codes: 0 a cause found (the minimal model or the setting), 1 the failure did not reproduce, nothing smaller "
    "fails the same way, the trial budget ran out before any smaller failing model, or the reduction failed, "
    "2 bad input or a missing module (TRT982: the extra to install), "
    "124 stopped by --timeout, 130 stopped by Ctrl-C"
)


def register(subparsers: Any) -> None:
    r = subparsers.add_parser(
        "reduce",
        help="reduce a failing engine build to the smallest model that still fails the same way",
        description="Every trial is a real worker build of a candidate cut from the model (Polygraphy's bisect "
        "for the last node kept, then the last node alone, the last two, and a bisect for the first); 'still "
        "fails' means the same classified failure. Writes .trtls/reduce/<id>/.",
        epilog=EPILOG,
    )
    r.add_argument("recipe", nargs="?", default=".", help="the folder or trtls.toml (default: .)")
    r.add_argument(
        "--engine",
        help="the engine whose build fails (or, with --diverge, whose conversion diverges); default: the recipe's "
        "only engine",
    )
    r.add_argument("--route", help="a parity reject: find the first layer where the route's converted model diverges")
    r.add_argument("--diverge", action="store_true", help="with --engine: the first diverging layer of its conversion")
    r.add_argument(
        "--fix", action="store_true", help="exclude the diverging node from the conversion and compare again"
    )
    r.add_argument(
        "--inputs", help="an .npz of inputs for --diverge (default: the route's reference_inputs, or seeded)"
    )
    r.add_argument(
        "--candidate",
        metavar="ONNX",
        help="with --diverge: compare this model with the reference (--reference, or the engine's ONNX) instead of "
        "a conversion; both run through ONNX Runtime with every tensor marked, same inputs",
    )
    r.add_argument("--reference", metavar="ONNX", help="with --candidate: the reference model (default: the engine's)")
    r.add_argument(
        "--tensorrt",
        action="store_true",
        help="with --diverge/--route: also compare the TensorRT engine's layers (every layer output marked); "
        "says not_checked, with the reason, where no engine can execute",
    )
    r.add_argument("--rtol", type=float, help="range-relative tolerance per tensor (default: by precision)")
    r.add_argument(
        "--max-trials",
        type=_trial_budget,
        default=40,
        help=f"stop after this many trial builds, 1 to {MAX_TRIALS} (default 40)",
    )
    r.add_argument("--timeout", type=positive_seconds, help="stop after this many seconds (exit 124)")
    r.add_argument(
        "--fail-regex",
        action="append",
        metavar="PATTERN",
        help="a failure trtls does not classify (a compiler error, an API usage error): a candidate still fails when "
        "its build fails and its error or log matches PATTERN (repeatable: any of them)",
    )
    r.add_argument(
        "--resume",
        action="store_true",
        help="continue the engine's latest stopped reduction (its verdicts replayed, not rebuilt) when the model and "
        "the engine's table are unchanged; otherwise start over, saying why",
    )
    r.add_argument("--json", action="store_true", help="print the result record as JSON")
    r.set_defaults(func=cmd_reduce)


def _trial_budget(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if not 1 <= value <= MAX_TRIALS:
        raise argparse.ArgumentTypeError(f"{value} is outside 1 to {MAX_TRIALS}")
    return value


class _Stoppable:
    def __init__(self, run: ReductionRun) -> None:
        self.run = run

    def cancel(self, source: str) -> bool:
        return bool(self.run.red.token.request(source))

    def force(self) -> None:
        if self.run.runner.current is not None:
            self.run.runner.current.force()


def cmd_reduce(args: argparse.Namespace) -> int:
    code = asyncio.run(_reduce(args))
    if not (args.route or args.diverge) and started_as_trtls():  # a build reduction: its record is on disk
        exit_promptly(code)
    return code


def started_as_trtls() -> bool:
    """This process is the `trtls` command itself (`python -m trtls` and the console script run `trtls.cli.entry.main`
    from `__main__`, `python -m trtls.cli` runs `trtls.cli.main.main`), not a caller that runs `main([...])` in its own
    process. By name: `trtls.cli.main` imports this module."""
    main = getattr(sys.modules.get("__main__"), "main", None)
    module = getattr(main, "__module__", None)
    return module in ("trtls.cli.main", "trtls.cli.entry") and getattr(main, "__qualname__", None) == "main"


def exit_promptly(code: int) -> None:
    """End the process now, without the interpreter's teardown, once everything a build reduction leaves is durable.

    By here `result.json` and `minimal.onnx` are written atomically (temp, fsync, rename, folder fsync), every trial's
    worker has been waited for (and its evidence written) by the supervisor, and `asyncio.run` has closed the loop and
    joined its executor threads. What a normal exit would still do is tear down the modules a reduction loads and
    a build does not — onnx, onnx_graphsurgeon, ONNX Runtime, Polygraphy, numpy — and free the model, its graph and
    the probe's tensors (ONNX Runtime also commits its own telemetry store, SQLite, which is left as a crash would
    leave it: consistent): no file of ours, no output, no exit code depends on it, and it was most of the margin of a
    reduction's stop over a build's (docs/performance.md, "Triage: trtls reduce"). So: the two streams, the atexit
    hooks (logging's flush; they run once), the streams again, then `os._exit`. A Python thread still running half a
    second on (`_threads_ended`) or a stream that cannot be flushed (a closed pipe) keeps the normal exit, which knows
    how to report them."""
    import atexit
    import os

    if not _threads_ended() or not _flushed():
        return
    atexit._run_exitfuncs()  # (and forgets them: a normal exit after this does not run them twice)
    if _flushed():
        os._exit(code)


def _threads_ended(bound_s: float = 0.5) -> bool:
    """Every other Python thread has ended, or ends within `bound_s` (one finishing its last lines beside a CPU
    burner). A thread the interpreter did not start — a library's own, that once asked for `threading.current_thread()`
    (logging does) — stays listed as a `_DummyThread` after it ended, and neither exit waits for it: it does not count.
    `threading.active_count() > 1` counted it, and a process that had one always took the normal exit."""
    import threading
    import time

    deadline = time.monotonic() + bound_s
    for thread in threading.enumerate():
        if thread is threading.current_thread() or isinstance(thread, threading._DummyThread):
            continue
        thread.join(max(0.0, deadline - time.monotonic()))
        if thread.is_alive():
            return False
    return True


def _flushed() -> bool:
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        return False
    return True


async def _reduce(args: argparse.Namespace) -> int:
    loaded = load_or_report(args.recipe)
    if loaded is None:
        return EXIT_BAD_INPUT
    if not _engine_named(loaded, args):
        return EXIT_BAD_INPUT
    if args.route or args.diverge:
        from trtls.cli.reduce_diverge import diverge

        return await diverge(loaded, args)
    from trtls.app.results import Refused
    from trtls.app.triage import request_reduction
    from trtls.cli.store_lookup import report_refused
    from trtls.triage.evidence import headline

    asked = await request_reduction(
        loaded, args.engine, max_trials=args.max_trials, fail_regex=args.fail_regex, resume=args.resume
    )
    if isinstance(asked, Refused):
        return report_refused(loaded, asked)
    run, red = asked, asked.red
    if red.resume_note is not None and not args.json:
        print(terminal_safe(red.resume_note), file=sys.stderr)
    install_stop_keys(_Stoppable(run), f"reduction of {args.engine}", quiet=args.json)
    if args.timeout is not None:
        asyncio.get_running_loop().call_later(args.timeout, red.token.request, "ci_timeout")
    seen = 0

    def progress() -> None:
        nonlocal seen
        for t in red.trials[seen:]:
            if t.outcome is None:
                return
            if not args.json:
                verdict = _verdict(t.outcome, t.still_fails)
                took = "replayed" if t.replayed else f"{t.seconds:.1f} s"
                print(f"  trial {t.index:>2} {t.step:<15} {t.nodes:>4} nodes  {verdict}  {took}", flush=True)
            seen += 1

    task = asyncio.ensure_future(run.run())
    while not task.done():
        await asyncio.wait({task}, timeout=0.2)
        progress()
    result = task.result()  # what went wrong inside is in the record (`error`): run() does not raise
    progress()
    if args.json:
        print(json.dumps(result.record(), default=str))
    else:
        print(result.headline if red.trials else headline(red))
        print(terminal_safe(f"{result.outcome}: {result.causeText}"))
    if result.error:  # located, on stderr (a --json run too): what failed inside, while doing what
        report_error(result.errorCode or "TRT983", terminal_safe(result.error), str(loaded.path))
    if not args.json:
        if result.minimal is not None:
            names = ", ".join(result.minimal.nodeNames[:6])
            print(f"minimal model: {red.folder / 'minimal.onnx'} ({result.minimal.nodes} nodes: {names})")
        good = result.minGood
        if good is not None and not result.evidenceError:
            print(f"min good: {red.folder / 'min_good.onnx'} ({good.nodes} nodes, trial {good.trial}: it builds)")
        evidence = result.evidenceError or red.folder / "result.json"  # TRT413: no result.json to point at
        print(terminal_safe(f"evidence: {evidence}"), file=sys.stderr)
    return _exit(result, red)


def _verdict(outcome: str, still_fails: bool) -> str:
    """A trial's line: a trial a stop ended (cancelled, or forced past its grace) built nothing to judge — no verdict,
    not "does not reproduce"."""
    if outcome in ("cancelled", "forced"):
        return f"{outcome} (no verdict)"
    return "still fails" if still_fails else f"does not reproduce ({outcome})"


def _engine_named(loaded: LoadedRecipe, args: argparse.Namespace) -> bool:
    """`--engine` where the request needs an engine and none was given: the recipe's only engine; with several, False
    after a located error naming them (a recipe with errors or with no engine is refused further on, as before). A
    route, or two given models (--candidate with --reference), needs no engine."""
    if args.engine is not None or args.route or (args.candidate and args.reference):
        return True
    engines = list(loaded.recipe.engines) if loaded.recipe is not None else []
    if len(engines) == 1:
        args.engine = engines[0]
        return True
    if not engines:
        return True
    need = "--engine NAME or --route NAME" if args.diverge else "--engine NAME"
    message = f"{need} is needed: this recipe has {len(engines)} engines ({', '.join(engines)})"
    report_error("TRT107", terminal_safe(message), str(loaded.path))
    return False


def _exit(result: ReductionResult, red: Reduction) -> int:
    """The outcome's exit code; 1 whenever the evidence could not be written (TRT413), whatever the outcome."""
    if result.evidenceError and result.outcome != "cancelled":
        return EXIT_FAILED
    if result.outcome == "cancelled":
        return EXIT_TIMEOUT if red.stopped_by == "ci_timeout" else EXIT_CTRL_C
    if result.found:  # a cause found (a budget stop: only with a smaller failing model found before it)
        return EXIT_OK
    if result.outcome == "failed" and result.errorCode == "TRT982":
        return EXIT_BAD_INPUT  # the install lacks a module: fixed by installing the extra the message names
    return EXIT_FAILED
