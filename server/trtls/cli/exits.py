"""The exit codes of every `trtls` command, in one table, and the one mapping from a build's outcome to its code.

Each command's `--help` lists the codes it can return (its epilog); they are all drawn from here.
"""

from __future__ import annotations

EXIT_OK = 0  # built, supported, shown, written, passed, clean
EXIT_FAILED = 1  # the build failed; an acceptance criterion failed
EXIT_BAD_INPUT = 2  # usage, a missing or unreadable file, recipe errors (`trtls check`: problems found)
EXIT_HOLD = 3  # gates: the route is held (unproven)
EXIT_REJECT = 4  # gates: the route is rejected; a bundle that fails verification
EXIT_TIMEOUT = 124  # cancelled by --timeout (as timeout(1))
EXIT_CTRL_C = 130  # cancelled by Ctrl-C (128 + SIGINT)
EXIT_KILLED = 137  # forced (the builder ignored the cancel) or killed (128 + SIGKILL)

DECISION_EXIT = {"supported": EXIT_OK, "hold": EXIT_HOLD, "reject": EXIT_REJECT}


def exit_code_of(outcome: str | None, cancel_source: str | None) -> int:
    """A build's (or a matrix's, or a route build's) outcome as an exit code: built 0, failed 1, forced or killed
    137, cancelled 124 by --timeout else 130; an outcome that never came (the worker vanished) counts as killed."""
    outcome = outcome or "killed"
    if outcome == "built":
        return EXIT_OK
    if outcome in ("forced", "killed"):
        return EXIT_KILLED
    if outcome == "cancelled":
        return EXIT_TIMEOUT if cancel_source == "ci_timeout" else EXIT_CTRL_C
    return EXIT_FAILED  # failed, or a route build that stopped with an error


def say_interrupted(command: str = "") -> int:
    """The one line (and code) of a command the person's Ctrl-C ended before it started anything of its own to stop:
    `trtls build: interrupted by Ctrl-C`, never a traceback. `command`: its name (a word of letters, or left out)."""
    import sys

    name = f" {command}" if command.isalpha() else ""
    print(f"\ntrtls{name}: interrupted by Ctrl-C", file=sys.stderr)
    return EXIT_CTRL_C
