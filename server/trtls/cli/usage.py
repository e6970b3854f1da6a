"""How the command line talks back when it is used wrongly: the right command's usage, JSON when asked for JSON.

- A bad option of `trtls build` prints `build`'s usage, not the top-level one (argparse hands unknown options
  of a subcommand to the top parser; `parse` gives them back to the subcommand that was chosen).
- With `--json` anywhere on the line, every error is also one JSON line on stdout
  (`{"type": "error", "code", "message", "file"?, "line"?, "col"?, "severity"}`; a warning's type is
  `diagnostic`), so a script reading
  stdout always learns why nothing happened; people still get the text on stderr.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Any, NoReturn

from trtls.cli.exits import EXIT_BAD_INPUT

USAGE = "TRT420"  # the code of a command line not understood: a bad option or argument (docs/codes/command-line.md)


class JsonErrors:
    """Whether errors are also JSON lines on stdout (set once from argv, before parsing)."""

    enabled = False
    out: Any = None  # where JSON lines go when sys.stdout is lent to a library's prints (cli/main: a farm run)


def emit_error(code: str, message: str, **where: Any) -> None:
    """One error for a script (JSON mode only; the caller prints the text for people)."""
    if JsonErrors.enabled:
        severity = where.pop("severity", "error")
        kind = "error" if severity == "error" else "diagnostic"  # a warning does not stop anything
        record = {"type": kind, "code": code, "message": message, "severity": severity}
        record.update({k: v for k, v in where.items() if v is not None})
        print(json.dumps(record), file=JsonErrors.out or sys.stdout, flush=True)


class TrtlsParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors (usage and exit 2) are also JSON lines in JSON mode."""

    def error(self, message: str) -> NoReturn:
        emit_error(USAGE, f"{self.prog}: {message}")
        self.print_usage(sys.stderr)
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: error: {message}\n")


RECIPE_HELP = "trtls.toml or its folder (default: .)"


def recipe_argument(parser: argparse.ArgumentParser, help: str = RECIPE_HELP) -> None:
    """The optional `recipe` positional every command that reads a recipe takes (one wording, one default)."""
    parser.add_argument("recipe", nargs="?", help=help)


def positive_seconds(text: str) -> float:
    """`--timeout`: a finite number of seconds above zero (0 used to mean none and -1 cancelled at once)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a number of seconds above 0, got {text!r} (omit it for no timeout)")
    return value


def output_file(value: str) -> str:
    """`-o`'s argument type: a blank name (`-o "$OUT"` with OUT unset) is bad input, never "no -o" — the report went to
    stdout and the command said exit 0, with no file written where the script looks for one."""
    if not value.strip():
        raise argparse.ArgumentTypeError("names no file (give a path, or leave -o out for stdout)")
    return value


def mark_leaf_parsers(parser: argparse.ArgumentParser) -> None:
    """Every parser records itself as the one that handles its arguments (the deepest chosen one wins)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                sub.set_defaults(_parser=sub)
                mark_leaf_parsers(sub)


def parse(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    words = sys.argv[1:] if argv is None else argv
    # trtls's own words only: `trtls import trtexec -- …` passes what follows `--` on as another tool's arguments
    JsonErrors.enabled = "--json" in (words[: words.index("--")] if "--" in words else words)
    mark_leaf_parsers(parser)
    args, extra = parser.parse_known_args(argv)
    if extra:
        getattr(args, "_parser", parser).error(f"unrecognized arguments: {' '.join(extra)}")
    return args
