"""The engine store before and after `trtls build`, in the terminal: the fast path of an unchanged build, and how the
application layer's answers read (trtls.app: a reuse, the store's lines around a build, a refusal, a matrix's cells
served or restored) — docs/store.md. Nothing here looks anything up: trtls.app does."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from trtls.cli.common import find_recipe, report_error, report_finding
from trtls.cli.exits import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK
from trtls.cli.usage import JsonErrors
from trtls.core.display import rebuilding_text
from trtls.core.terminal_text import terminal_safe

if TYPE_CHECKING:  # the fast path imports this module before pydantic: types only
    import subprocess

    from trtls.app.matrix import FollowerDone
    from trtls.builds.cuda import DriverProbe
    from trtls.builds.supervisor.speculation import JobAhead
    from trtls.core.recipe import LoadedRecipe
    from trtls.core.summary_record import Summary


def say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def say_warning(warning: str) -> None:
    say(f"warning: {warning}")


def say_lookup(engine: str, use: Any, *, quiet: bool, building: bool = False) -> None:
    """The lookup's warnings (always), then why the engine is rebuilt (`building`, not with --json)."""
    if use is None:
        return
    for w in use.all_warnings():
        say_warning(w)
    if building and use.changes and not quiet:
        say(rebuilding_text(engine, use.changes))


def stop_words(
    run: Any, timeout_s: float | None = None, then: Callable[[str], str | None] | None = None
) -> Callable[[str], str | None]:
    """The words of a stop of `run` — a build, or a matrix and its cells — (`cli/common.StopKeys.bind`), given its
    source, read from its state at the stop. While a build of it runs (or a cell waits to start): the cooperative stop
    (a Ctrl-C's line). Once every build has ended, a stop no longer stops one (`Build.cancel`): what it still cuts is
    their ends' upload of the engine to the remote store — said for each build whose upload a stop cuts now
    (`Build.upload_a_stop_cuts`, the store's own reading: sending, or still to come); else, when every build is
    built, what the caller's own step after them stops (`then`: a route build's bundle step); otherwise nothing is
    said but the outcome that follows. A Ctrl-C or the `--timeout` (`timeout_s`) is said this way; a SIGTERM, as
    before, not."""
    from trtls.app.stop import run_name, upload_cut_text
    from trtls.cli.common import cooperative_stop_line
    from trtls.core.display import human_seconds

    cells = getattr(run, "cells", None)  # a matrix's builds (it has a list of them); a build is its own one
    matrix = isinstance(cells, list)

    def words(source: str) -> str | None:
        builds = list(cells) if isinstance(cells, list) else [run]
        if (matrix and run.not_started) or any(b.state.outcome is None for b in builds):
            return cooperative_stop_line("every cell" if matrix else run.engine) if source == "ctrl_c" else None
        cut = [(b, url) for b in builds if (url := b.upload_a_stop_cuts()) is not None]
        if not cut:
            if then is not None and builds and all(b.state.outcome == "built" for b in builds):
                return then(source)
            return None
        names = ", ".join(run_name(b) for b, _ in cut)  # as the editor's Stop names them: escaped
        remotes = ", ".join(dict.fromkeys(url for _, url in cut))  # one store: the recipe's
        one = len(cut) == 1
        verb, past = ("is", "was") if one else ("are", "were")
        what = f"stopping {upload_cut_text('its' if one else 'their', remotes, many=not one)}…"  # the editor's words
        if source == "ctrl_c":
            return f"{names} {verb} built already; {what}"
        if source == "ci_timeout" and timeout_s is not None:
            return f"--timeout: {human_seconds(timeout_s)} passed after {names} {past} built; {what}"
        return None

    return words


def report_refused(loaded: Any, refused: Any) -> int:
    """A request the application layer refused (trtls.app.results.Refused), each finding located on the recipe by
    `cli/common.report_finding`, as `trtls check` prints one (a rollback's pin that cannot be served, TRT338, on its
    `[engines.NAME]` table: `trtls.toml:6:1: TRT338 error: …`); a request naming what the recipe lacks is about no key
    (`file: CODE message`). Exit 1 when a rollback's pin could not be served (the recipe is fine: the store is not),
    else 2."""
    for w in refused.warnings:
        say_warning(w)
    for f in refused.findings:
        if refused.because == "bad_request":  # the request, not a key of the recipe, is wrong
            report_error(f.code, f.message, str(loaded.path))
        else:
            report_finding(loaded, f)
    return EXIT_FAILED if refused.because == "pin_unavailable" else EXIT_BAD_INPUT


def json_waiting(engine: str, holder: str) -> None:
    """`--json`: one line when this build starts waiting for another process's build of its key (the evidence's
    `store.waitedFor` says the same afterwards)."""
    pid, _, build_id = holder.partition(" ")
    record = {
        "type": "store_wait",
        "engine": engine,
        "holder": {"pid": int(pid) if pid.isdigit() else None, "buildId": build_id or None, "line": holder},
        "message": f"waiting for build {holder} of the same engine key (another process) — it will be reused",
    }
    print(json.dumps(record), file=JsonErrors.out or sys.stdout, flush=True)


def print_reused(engine: str, reused: dict[str, Any], recipe: Any, as_json: bool) -> int:
    """The reuse in the terminal; 1 when its evidence could not be written (TRT413, `evidenceError`): the engine is
    in place but no summary.json says so, and claiming one would point at a file that is not there."""
    error = reused.get("evidenceError")
    if as_json:
        print(json.dumps({"type": "summary", "summary": reused}, default=str), flush=True)
        return EXIT_FAILED if error else EXIT_OK
    print(terminal_safe(f"{engine}: {reused['message']}"))
    print(terminal_safe(f"  output: {reused['engineArtifact']['path']}"))
    if error:
        print(terminal_safe(f"  evidence: {error}"))
        return EXIT_FAILED
    print(terminal_safe(f"  evidence: {recipe.parent / '.trtls' / 'runs' / reused['buildId'] / 'summary.json'}"))
    return EXIT_OK


class Started(NamedTuple):
    """What the fast path hands the full path (`take_started`): the worker it started, the job sent to it ahead
    (`speculation.JobAhead`) or None, and the recipe it checked to make that job (`check_ahead`) or None."""

    worker: subprocess.Popen[bytes]
    ahead: JobAhead | None = None
    checked: LoadedRecipe | None = None
    warming: DriverProbe | None = None  # with `checked`: the key's device probe started beside that check


_declined_by_entry = False  # the program's entry tried this command line and declined: the full path's call skips
known_miss = False  # the fast path saw the engine's key (its memo held) absent from the store: a build follows
_started: Started | None = None


def _note_miss(
    recipe: Any, engine: str, job_of: Callable[[], dict[str, Any] | None], known: dict[str, Any] | None = None
) -> None:
    """A build is certain (a known miss, `--no-store`, `--rebuild`), so its worker starts now — before the parser,
    asyncio and the build's modules are imported — and, when `job_of` gives the last build's job (the memo's, nothing
    the key reads changed), gets this build's job ahead of the check (builds/supervisor/speculation.py). `job_of` is
    asked after the spawn: where it still hashes the inputs (`--no-store`), that runs while the worker starts.
    `cli.main` adopts the worker (`take_started`). `known`: the memo's job, already in hand (a known miss)."""
    global known_miss
    known_miss = True
    _start_worker(recipe, engine, job_of, known)


def _note_changed(recipe: Any, engine: str) -> None:
    """The engine's memo no longer holds (something the key reads changed since its last build here): the key is known
    only after the recipe models load, ~0.2 s here (issue 31), and the lookup after an edit mostly misses. Its worker
    starts now, with no job, and imports TensorRT while the recipe is checked and looked up; the full path still looks
    up (`known_miss` stays False), and a hit kills the worker unused (app.build.request_build `discard`): a worker
    that was sent nothing has written nothing. With no memo at all (a fresh clone, a team's store) a hit is as likely
    and nothing starts before the lookup."""
    _start_worker(recipe, engine, lambda: None)


def _start_worker(
    recipe: Any, engine: str, job_of: Callable[[], dict[str, Any] | None], known: dict[str, Any] | None = None
) -> None:
    global _started
    from trtls.builds.supervisor.spawn import preload_for, preload_of_job
    from trtls.builds.supervisor.worker_launch import drop_unadopted

    # A known miss's memo job names the builder to preload: the worker starts before the raw recipe is parsed (the
    # TOML reader and its parse, ~6 ms of the spawn's path here, 2026-12-05), which then confirms it beside the start.
    guess = preload_of_job(known)
    worker = _spawn(guess or preload_for(recipe, engine))
    if worker is not None and guess is not None and (confirmed := preload_for(recipe, engine)) != guess:
        drop_unadopted(worker)  # the recipe's engine wants another builder, or none started early: as if not guessed
        worker = _spawn(confirmed)
    if worker is None:
        return
    _started = Started(worker)  # adopted even if what follows is interrupted
    job = job_of()
    if job is not None:
        from trtls.builds.run_ids import new_run_id
        from trtls.builds.supervisor.speculation import let_it_start, send_ahead

        _started = Started(worker, ahead := send_ahead(worker, job, engine, new_run_id(engine)))
        if ahead is not None:
            let_it_start(worker)  # the check runs beside the builder, not its start, where CPUs are scarce


def check_ahead(args: argparse.Namespace) -> None:
    """A worker the fast path started and sent nothing (the engine's view of the recipe changed since its last build
    here, or a certain build with no job to remember): the recipe is checked now, and its job sent ahead
    (app.request.checked_job_ahead), before the command line's modules, asyncio and the store's lookup are imported —
    what the job used to wait for: the builder started ~55 ms sooner here, ~90–140 ms on the 16-core host
    (`probe_cli_timeline.py --store retuned`, 2026-12-07, docs/performance.md). The full path takes the checked recipe
    with the worker (`take_started`) and says its findings as it says any (`cli/common.load_or_report`): this reports
    nothing. Where CPUs are scarce, as after any job sent ahead, this process then waits for the builder's start
    (`speculation.let_it_start`)."""
    global _started
    if _started is None or _started.ahead is not None:
        return
    path = find_recipe(args.recipe)
    if not path.is_file():
        return  # the full path says why (TRT104), and ends the worker
    warming = key_device_probe(path.parent, args.engine)  # before the recipe models' imports (pydantic's)
    from trtls.app.request import checked_job_ahead
    from trtls.builds.supervisor.speculation import let_it_start
    from trtls.onnx_files.profile_checks import check_recipe

    checked = check_recipe(path)
    worker = _started.worker
    _started = Started(worker, ahead := checked_job_ahead(worker, checked, args.engine), checked, warming)
    if ahead is not None:
        let_it_start(worker)


def key_device_probe(recipe_folder: Path, history: str | None) -> Any:
    """The store key's device probe (cuInit: ~0.2 s with a GPU) started now on a thread of its own, beside the recipe's
    check — unless the last build's memo of `history` (an engine; None: a matrix, whose cells each have theirs), or
    this account's last probe on this host, still says the device (the driver's files unchanged): then every key takes
    it from there and no cuInit runs here. The probe (`builds.cuda.DriverProbe`, settled before the command ends), or
    None."""
    from trtls.builds.avoidance.memo import remembered_device
    from trtls.builds.cuda import warm_driver

    return None if remembered_device(recipe_folder / ".trtls", history) is not None else warm_driver()


def _spawn(preload: str | None) -> Any:
    """The early worker preloading `preload` (the one the program's entry started, when it did), or None: no preload
    (an external worker, a cluster: the full path places its own) or no process (the full path says why)."""
    from trtls.builds.supervisor.worker_launch import drop_ahead, start_now, take_ahead

    if preload is None:
        drop_ahead()
        return None
    try:
        return take_ahead(preload) or start_now(preload)
    except OSError:
        return None


def take_started() -> Started | None:
    """The worker the fast path started, the job it was sent ahead and the recipe checked for it (once), or None."""
    global _started
    started, _started = _started, None
    return started


def drop_started() -> None:
    """A worker the fast path started that nobody took (the person's Ctrl-C before the full path; a previous command
    line's, for a caller of main([...])): it ends without building (`drop_unadopted`)."""
    started = take_started()
    if started is not None:
        from trtls.builds.supervisor.worker_launch import drop_unadopted

        drop_unadopted(started.worker)
        if started.warming is not None:
            started.warming.settle()  # the key's device probe `check_ahead` started: no thread left in the driver


def fast_path(args: argparse.Namespace, *, entry: bool = False) -> int | None:
    """An unchanged `trtls build --engine NAME`: restored from the store before the recipe models are even imported
    (builds/avoidance/reuse.py); None → the usual path. `entry`: the call of `cli.entry`, whose decline the full path's
    own
    call then takes as its answer (once) instead of hashing the recipe and reading the memo a second time."""
    global _declined_by_entry, known_miss
    if _declined_by_entry and not entry:
        _declined_by_entry = False
        return None
    known_miss = False  # this command line's answer only (a caller may run several in one process)
    drop_started()
    done = _fast_path(args)
    _declined_by_entry = entry and done is None
    if done is None:
        try:
            check_ahead(args)
        except BaseException:
            drop_started()  # it wrote nothing; the full path is not reached
            raise
    return done


def _fast_path(args: argparse.Namespace) -> int | None:
    if not args.engine or args.all or args.matrix or args.cell or args.cold:
        return None
    if getattr(args, "unpin", False):
        return None
    if args.optimization_level is not None:
        return None
    recipe = find_recipe(args.recipe).resolve()
    if args.no_store or args.rebuild:  # a build is certain: its worker starts now, with the last job if unchanged
        from trtls.app.unchanged import job_unchanged

        _note_miss(recipe, args.engine, lambda: job_unchanged(recipe, args.engine))
        return None
    from trtls.app.unchanged import reuse_unchanged

    reused = reuse_unchanged(
        recipe,
        args.engine,
        lambda job: _note_miss(recipe, args.engine, lambda: job, job),
        lambda: _note_changed(recipe, args.engine),
    )
    if reused is None:
        return None
    if not args.json:
        for w in reused["store"].get("warnings") or []:  # the store's own notes (a remote's miss, read-only)
            say_warning(w)
    return print_reused(args.engine, reused, recipe, bool(args.json))


def say_cells_looked_up(warnings: list[str], reused: list[tuple[Any, dict[str, Any]]], *, as_json: bool) -> None:
    """A matrix's lookup (trtls.app.request_matrix): the store's warnings, then each cell it served — a line, or with
    --json the cell's evidence record, as for a build."""
    for w in warnings:
        say_warning(w)
    for p, summary in reused:
        if as_json:
            record = {"type": "cell_summary", "cell": p.key, "buildId": summary.get("buildId"), "summary": summary}
            print(json.dumps(record, default=str), file=JsonErrors.out or sys.stdout, flush=True)
        else:
            print(f"{p.key}: {summary['message']}")


def follower_said(missing: list[str], *, quiet: bool) -> FollowerDone:
    """What became of a cell of the same key as one the matrix built (restored from its entry, or not built), said;
    a cell that could not be restored is added to `missing`: the matrix did not produce every output it was asked
    for, whatever its built cells say (the caller's exit code)."""

    def on_follower(cell: str, summary: Summary | None, said: str) -> None:
        if summary is None:
            missing.append(cell)
        if not quiet:
            print(f"{cell}: {said}", file=sys.stdout if summary is not None else sys.stderr, flush=True)

    return on_follower
