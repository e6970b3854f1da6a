"""The `trtls` entry answers only an unchanged `build [RECIPE] --engine NAME [--json]` before the real parser, and
starts the worker of a certain build (`--no-store`, `--rebuild`) there; every other command line goes to
`trtls.cli.main` unchanged (a flag it does not know, a typo, a second positional)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from trtls.cli.entry import simple_build


@pytest.mark.parametrize(
    "argv",
    [
        ["build", "--engine", "demo"],
        ["build", ".", "--engine", "demo"],
        ["build", "--engine=demo", "samples/quickstart", "--json"],
    ],
)
def test_an_unchanged_build_is_one_the_entry_may_answer(argv: list[str]) -> None:
    args = simple_build(argv)
    assert args is not None and args.engine == "demo" and args.command == "build"
    assert not (args.rebuild or args.no_store or args.cold or args.all or args.matrix or args.unpin)


@pytest.mark.parametrize(
    ("argv", "flags"),
    [
        (["build", "--engine", "demo", "--no-store"], {"no_store"}),
        (["build", ".", "--rebuild", "--engine", "demo"], {"rebuild"}),
        (["build", "--engine", "demo", "--no-store", "--rebuild", "--json"], {"no_store", "rebuild", "json"}),
    ],
)
def test_a_certain_build_is_taken_by_the_entry_with_its_flags(argv: list[str], flags: set[str]) -> None:
    """`--no-store` and `--rebuild` build for certain: the entry starts their worker (and sends the last job ahead)
    before the real parser loads, then the real parser takes the same command line."""
    args = simple_build(argv)
    assert args is not None and args.engine == "demo"
    assert {f for f in ("no_store", "rebuild", "json") if getattr(args, f)} == flags
    assert not (args.cold or args.all or args.matrix or args.unpin)


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["check", "--engine", "demo"],
        ["build"],  # every engine: the real path
        ["build", "--engine"],
        ["build", "--engine", "--json"],
        ["build", "--engine", "demo", "--unpin"],
        ["build", "--engine", "demo", "--cold"],
        ["build", "--engine", "demo", "--optimization-level", "3"],
        ["build", "--engine", "demo", "--engnie", "x"],
        ["build", "a", "b", "--engine", "demo"],
        ["build", "--engine", "demo", "--", "x"],
    ],
)
def test_every_other_command_line_goes_to_the_real_parser(argv: list[str]) -> None:
    assert simple_build(argv) is None


def test_the_installed_program_and_python_m_use_the_entry() -> None:
    """A misspelt flag still gets the real parser's located usage error (exit 2), not a fast-path answer."""
    program = Path(sys.executable).parent / "trtls"  # the console script pip wrote from pyproject.toml
    for cmd in ([sys.executable, "-m", "trtls"], [str(program)]):
        done = subprocess.run([*cmd, "build", "--engine", "demo", "--rebuld"], capture_output=True, text=True)
        assert done.returncode == 2, done
        assert "--rebuld" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize(
    "argv",
    [
        ["build", "--engine", "demo"],
        ["build", "samples/quickstart", "--engine", "demo", "--no-store"],
        ["build", "--engine=demo", "samples/quickstart", "--json", "--rebuild"],
        ["build", "--rebuild", "--engine", "demo", "--no-store", "--json"],
    ],
)
def test_a_simple_build_is_what_the_parser_makes_of_the_same_words(argv: list[str]) -> None:
    """cli.main runs the entry's simple build without making the parser (~40 ms): it must be the very namespace the
    parser makes of those words (a new `build` flag with a default the entry does not know fails here)."""
    from trtls.cli.main import _simple_build, make_parser
    from trtls.cli.usage import parse

    simple = simple_build(argv)
    assert simple is not None
    parsed = vars(parse(make_parser(), argv))
    parsed.pop("_parser")
    assert vars(_simple_build(simple)) == parsed
