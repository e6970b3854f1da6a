"""What the terminal subcommands share: finding and checking the recipe (every finding printed, located), reporting
an error that is not a finding, and the two-press Ctrl-C of anything that builds."""

from __future__ import annotations

import signal
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from trtls.cli.usage import emit_error
from trtls.core.terminal_text import terminal_safe

if TYPE_CHECKING:
    from trtls.core.findings import Finding

T = TypeVar("T")

RECIPE_HINT = "trtls build takes a trtls.toml recipe or the folder that holds one"


def find_recipe(arg: str | None) -> Path:
    p = Path(arg or ".")
    return p / "trtls.toml" if p.is_dir() else p


def load_or_report(recipe_arg: str | None, checked: Any = None) -> Any:
    """Load the recipe and check it against its ONNX models; print every finding as
    `file:line:col: CODE severity: message`, in file order (and, with --json, as JSON lines on stdout).
    None when anything is an error (so no build starts: exit 2). `checked`: this command's check of the same recipe,
    made already (cli/store_lookup.py `check_ahead`), said here and not made again."""
    from trtls.onnx_files.profile_checks import check_recipe

    path = find_recipe(recipe_arg)
    if not recipe_file_or_report(path):
        return None
    loaded = checked if checked is not None and checked.path == path.resolve() else check_recipe(path)
    hint = "" if path.suffix == ".toml" else f" ({RECIPE_HINT})"
    for f in loaded.in_file_order(loaded.findings):
        report_finding(loaded, f, hint)
    return loaded if loaded.recipe is not None else None


def recipe_file_or_report(path: Path, hint: str = RECIPE_HINT) -> bool:
    """True when `path` is a regular file a recipe can be read from; else its TRT104 said on its path, as text on
    stderr and, in JSON mode, one error record (`report_error`) — what every command says of a recipe it cannot find
    (`load_or_report`, `trtls check`)."""
    if path.is_file():
        return True
    why = "recipe file not found"
    if path.exists():
        why = f"not a regular file ({_kind_of(path)}); recipes are files"
    report_error("TRT104", f"{why} ({hint})", str(path))
    return False


def report_finding(loaded: Any, f: Finding, hint: str = "") -> None:
    """The one way the terminal says a finding about a recipe: `file:line:col: CODE severity: message` on stderr, placed
    by the finding's own TOML path (`LoadedRecipe.location`, the rule the editor's answers use too: a rollback's pin
    that cannot be served, TRT338, on its `[engines.NAME]` table), and in --json mode one JSON line with the same
    place. A command's recipe check (`load_or_report`), a refused request (`store_lookup.report_refused`: a pin that
    cannot be served) and a failed rollback (`trtls rollback`) print their findings here, never by hand."""
    print(finding_line(loaded, f, hint), file=sys.stderr)
    emit_finding(loaded, f, hint)


def emit_finding(loaded: Any, f: Finding, hint: str = "") -> None:
    """A recipe finding as a script reads it (--json mode only): one JSON line, placed as `report_finding` places it;
    for a command whose text for people says the finding its own way (`trtls route build`'s refused route)."""
    rng = loaded.source_map.range(f.path, f.on_value)
    line, col = rng.start_line + 1, rng.start_col + 1
    emit_error(f.code, f.message + hint, file=str(loaded.path), line=line, col=col, severity=f.severity.value)


def finding_text(f: Finding, hint: str = "") -> str:
    """`CODE severity: message` of a finding, terminal-safe and one line (a newline or an escape in a message is
    printed as `\\x0a`/`\\x1b`, never acted on): the part of `finding_line` a command with no file to place it in
    says after its own name (`trtls import trtexec: …`)."""
    return terminal_safe(f"{f.code} {f.severity.value}: {f.message}{hint}", keep_newlines=False)


def finding_line(loaded: Any, f: Finding, hint: str = "") -> str:
    """The one rendering of a recipe finding for people: `file:line:col: CODE severity: message`, placed by
    `LoadedRecipe.location`. `report_finding` prints it, and every command that lists findings uses it — `trtls check`
    (its text report), `trtls route`, `trtls import trtexec`, `trtls gates`, a build's outcome — so a finding reads
    the same in each."""
    return f"{terminal_safe(loaded.location(f), keep_newlines=False)}: {finding_text(f, hint)}"


def report_error(code: str, message: str, file: str, line: int | None = None, col: int | None = None) -> None:
    """A CLI error that is not a recipe finding: `file[:line:col]: CODE message` on stderr, and a JSON line in --json
    mode with the same place."""
    where = file if line is None else f"{file}:{line}:{col or 1}"
    print(f"{where}: {code} {message}", file=sys.stderr)
    emit_error(code, message, file=file, line=line, col=col)


def report_command_error(command: str, code: str, message: str, severity: str = "error") -> None:
    """An error of a command's own words or of what it was given that no file holds (`usage`: a bad argument): `trtls
    COMMAND: message` on stderr, and in --json mode the same error record a file's error is (`report_error`), with
    no place."""
    print(f"trtls {command}: {message}", file=sys.stderr)
    emit_error(code, message, severity=severity)


def cooperative_stop_line(what: str) -> str:
    """The line of a Ctrl-C while `what` runs: its cooperative stop, and what a second press does."""
    return f"stopping {what} (cooperative; Ctrl-C again to force)…"


class Stoppable(Protocol):
    def cancel(self, source: str) -> Any: ...

    def force(self) -> None: ...


class StopKeys:
    """Ctrl-C once: a cooperative cancel (source ctrl_c), said on stderr unless `quiet`; twice: force (skip the
    grace). SIGTERM: a cooperative cancel with source service_shutdown. `--timeout`: `stop("ci_timeout")`.

    Installed before its target exists (`bind`), as a build's are: from the moment a job may reach a worker (the
    request's own job goes to an early worker as soon as the recipe is checked: app/request.py) a press is this
    build's stop, never asyncio's default one (which cancelled the main task at once: the command ended with no
    evidence and the worker still building). The loop runs these handlers between task steps only, so a press lands
    either while the request waits — it is cancelled (`request_until_stopped` gives None, `source` says why): a lookup,
    a wait for another process's build of the same key, nothing built — or once the target is bound (the request's
    return and `bind` share one step). A stop kept for `bind` is the net for a caller that awaits between the two.

    What a stop is said as comes from `words` (the stop's source → its line, or None for nothing): the cooperative
    stop's line until the target binds words of its own — a build that has ended says what its end still does that a
    stop cuts, from its state (`store_lookup.stop_words`), never that the build is stopping."""

    def __init__(self, target: Stoppable | None, what: str, quiet: bool) -> None:
        self.target, self.what, self.quiet = target, what, quiet
        self.presses = 0
        self.source: str | None = None  # the first stop asked before a target was bound
        self.request: Any = None  # the task awaiting the request, until the request returns
        self.words: Callable[[str], str | None] = self._cooperative

    def _cooperative(self, source: str) -> str | None:
        return cooperative_stop_line(self.what) if source == "ctrl_c" else None

    def on_sigint(self) -> None:
        self.presses += 1
        if self.presses == 1:
            self.stop("ctrl_c")
        elif self.target is not None:
            self.target.force()

    def on_sigterm(self) -> None:
        self.stop("service_shutdown")

    def stop(self, source: str) -> None:
        """A stop from `source`, said first (unless `quiet`) in the words of what it cuts now: read before the stop
        is applied, from the state it finds."""
        line = None if self.quiet else self.words(source)
        self._cancel(source)
        if line is not None:
            print(f"\n{line}", file=sys.stderr, flush=True)

    def _cancel(self, source: str) -> None:
        if self.target is not None:
            self.target.cancel(source)
            return
        self.source = self.source or source
        if self.request is not None:
            self.request.cancel(source)  # the source as its message: the store lookup's cut says it (avoidance.lookup)

    async def request_until_stopped(self, request: Awaitable[T]) -> T | None:
        """`request` awaited until it returns its target (bind it then); None when a stop asked meanwhile cancelled
        it (`said_stopped` gives the command's line and code). It runs in this task, not one of its own: what the
        request starts (a supervisor's task) runs only after the caller has bound its target and attached its view,
        as when it was awaited plainly, so no event of the build is missed."""
        import asyncio

        self.request = asyncio.current_task()
        try:
            return await request
        except asyncio.CancelledError:
            if self.source is None or self.request is None or self.request.uncancel() > 0:
                raise  # a cancel of this task by someone else too: theirs to handle
            return None
        finally:
            self.request = None  # a stop asked from now on waits for `bind`

    def said_stopped(self, command: str) -> int:
        """The line and exit code of a request a stop ended before it started anything to stop (`source`)."""
        from trtls.cli.exits import exit_code_of, say_interrupted

        if self.source == "ctrl_c":
            return say_interrupted(command)
        print(f"\ntrtls {command}: stopped ({self.source}) before anything started", file=sys.stderr)
        return exit_code_of("cancelled", self.source)

    def bind(self, target: Stoppable, words: Callable[[str], str | None] | None = None) -> None:
        """The target from now on, with the words of its stop (`words`; default: the cooperative stop's); a stop
        asked before it is applied to it at once (twice pressed: forced too)."""
        self.target = target
        if words is not None:
            self.words = words
        if self.source is not None:
            target.cancel(self.source)
            if self.presses >= 2:
                target.force()


def install_stop_keys(target: Stoppable | None, what: str, *, quiet: bool = False) -> StopKeys:
    """`StopKeys` on the running loop's SIGINT and SIGTERM (a target of None: bound later)."""
    import asyncio  # here, not at the top: an unchanged build answered from the store never starts a loop

    loop = asyncio.get_running_loop()
    keys = StopKeys(target, what, quiet)
    loop.add_signal_handler(signal.SIGINT, keys.on_sigint)
    loop.add_signal_handler(signal.SIGTERM, keys.on_sigterm)
    return keys


def _kind_of(path: Path) -> str:
    import os

    from trtls.core.recipe_file import file_kind

    return file_kind(os.stat(path).st_mode)
