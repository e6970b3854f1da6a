"""What the terminal subcommands share: finding and checking the recipe (every finding printed, located), reporting
an error that is not a finding, and the two-press Ctrl-C of anything that builds."""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from typing import Any, Protocol

from trtls.cli.usage import emit_error

RECIPE_HINT = "trtls build takes a trtls.toml recipe or the folder that holds one"


def find_recipe(arg: str | None) -> Path:
    p = Path(arg or ".")
    return p / "trtls.toml" if p.is_dir() else p


def load_or_report(recipe_arg: str | None) -> Any:
    """Load the recipe and check it against its ONNX models; print every finding as
    `file:line:col: CODE severity: message`, in file order (and, with --json, as JSON lines on stdout).
    None when anything is an error (so no build starts: exit 2)."""
    from trtls.onnx_files.profile_checks import check_recipe

    path = find_recipe(recipe_arg)
    if not path.is_file():
        why = "recipe file not found"
        if path.exists():
            why = f"not a regular file ({_kind_of(path)}); recipes are files"
        report_error("TRT104", f"{why} ({RECIPE_HINT})", str(path))
        return None
    loaded = check_recipe(path)
    hint = "" if path.suffix == ".toml" else f" ({RECIPE_HINT})"
    located = [(loaded.source_map.range(f.path, f.on_value), f) for f in loaded.findings]
    for rng, f in sorted(located, key=lambda item: (item[0].start_line, item[0].start_col)):
        print(f"{loaded.path}:{rng.human()}: {f.code} {f.severity.value}: {f.message}{hint}", file=sys.stderr)
        line, col = rng.start_line + 1, rng.start_col + 1
        emit_error(f.code, f.message + hint, file=str(loaded.path), line=line, col=col, severity=f.severity.value)
    return loaded if loaded.recipe is not None else None


def report_error(code: str, message: str, file: str) -> None:
    """A CLI error that is not a recipe finding: text on stderr, and a JSON line in --json mode."""
    print(f"{file}: {code} {message}", file=sys.stderr)
    emit_error(code, message, file=file)


class Stoppable(Protocol):
    def cancel(self, source: str) -> Any: ...

    def force(self) -> None: ...


def install_stop_keys(target: Stoppable, what: str, *, quiet: bool = False) -> None:
    """Ctrl-C once: a cooperative cancel (source ctrl_c), said on stderr unless `quiet`; twice: force (skip the
    grace). SIGTERM: a cooperative cancel with source service_shutdown. Needs the running loop."""
    import asyncio  # here, not at the top: an unchanged build answered from the store never starts a loop

    loop = asyncio.get_running_loop()
    presses = 0

    def on_sigint() -> None:
        nonlocal presses
        presses += 1
        if presses == 1:
            target.cancel("ctrl_c")
            if not quiet:
                print(f"\nstopping {what} (cooperative; Ctrl-C again to force)…", file=sys.stderr, flush=True)
        else:
            target.force()

    loop.add_signal_handler(signal.SIGINT, on_sigint)
    loop.add_signal_handler(signal.SIGTERM, lambda: target.cancel("service_shutdown"))


def _kind_of(path: Path) -> str:
    import os

    from trtls.core.recipe_file import file_kind

    return file_kind(os.stat(path).st_mode)
