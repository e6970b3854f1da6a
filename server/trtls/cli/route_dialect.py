"""The one dialect of the route lifecycle commands: `trtls route promote|status|canary|rollback [RECIPE] --route
NAME` (as `trtls gates`, `route build` and `route lock` take it), registered under `trtls route` by
`cli.gates.register`; `cli.route_lifecycle.lifecycle_words` reads the words (and the old `NAME --recipe R`, with a
note)."""

from __future__ import annotations

import argparse
from typing import Any

from trtls.cli.usage import RECIPE_HELP, TrtlsParser


class _WordsAnywhereParser(TrtlsParser):
    """A lifecycle command's parser: its words (RECIPE, the canary's step, the old dialect's route name) may come
    before or after the options. argparse takes a command's positionals from the first run of words only, so
    `route canary RECIPE --route NAME pass` would leave `pass` unrecognized; the words after an option are taken
    back here and `cli.route_lifecycle.lifecycle_words` reads them all."""

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
        parsed, extra = super().parse_known_args(args, namespace)
        words = [e for e in extra if not e.startswith("-")]
        parsed.words = list(getattr(parsed, "words", None) or []) + words
        return parsed, [e for e in extra if e.startswith("-")]


APPROVER_HELP = "who approves (default: $TRTLS_APPROVER, else git's user.email in the recipe's repository, else $USER)"


def register_lifecycle(rsub: Any) -> None:
    """`trtls route promote|status|canary|rollback [RECIPE] --route NAME` (docs/gates.md, "Promotion and
    revalidation"); the old `NAME --recipe R` still works, with a deprecation note on stderr."""

    def step(name: str, help: str, epilog: str, words: str = "[RECIPE]") -> Any:
        """A lifecycle step's parser with what every step takes; it runs `cli.route_lifecycle.cmd_route_<name>`."""
        p = rsub.add_parser(name, help=help, epilog=epilog)
        p.__class__ = _WordsAnywhereParser  # made by the subparsers action as a TrtlsParser: only this is added
        p.add_argument("words", nargs="*", metavar=words, help=RECIPE_HELP)
        p.add_argument("--route", help="the route (status: default every route)")
        p.add_argument("--recipe", help=argparse.SUPPRESS)  # the old dialect: `NAME --recipe R`
        p.add_argument("--format", choices=("text", "json"), default="text", help="output format (default: text)")
        p.add_argument("--json", action="store_true", help="--format json; every error as a JSON line too (on stdout)")
        p.set_defaults(func=lambda a: _lifecycle(f"cmd_route_{name}", a), lifecycle=name)
        return p

    pm = step(
        "promote",
        "promote a route whose last complete gates run is supported and current (appends to trtls.promotions.jsonl)",
        "exit codes: 0 promoted (or already), 2 bad input, 3 refused (an item missing or not current), "
        "4 the promotion ledger is tampered",
    )
    pm.add_argument("--approver", help=APPROVER_HELP)
    step(
        "status",
        "what is promoted, since when, and whether it is still valid",
        "exit codes: 0 promoted and valid, 1 not promoted, 2 bad input, 3 revalidate, 4 canary failed or the "
        "ledger is tampered (the worst of the routes shown)",
    )
    cn = step(
        "canary",
        "record the promoted bundle's canary: start, then pass or fail with its figures (checked against the "
        "plan's abort_if)",
        "exit codes: 0 recorded, 2 bad input, 3 refused (wrong step, a figure the plan needs missing, a pass "
        "whose figures break abort_if), 4 tampered",
        "[RECIPE] {start,pass,fail}",
    )
    cn.add_argument(
        "--figure",
        action="append",
        metavar="NAME=VALUE",
        help="a canary figure, e.g. p95_ms=41.5 or error_rate=0.05%% (repeatable)",
    )
    cn.add_argument("--approver", help=APPROVER_HELP)
    rb = step(
        "rollback",
        "move the promoted pointer back to the previous promoted bundle (a new ledger record; files untouched)",
        "exit codes: 0 rolled back, 2 bad input, 3 refused (nothing to roll back to, its file is gone), 4 tampered",
    )
    rb.add_argument("--approver", help=APPROVER_HELP)
    rb.add_argument("--reason", help="why (recorded)")


def _lifecycle(name: str, args: argparse.Namespace) -> int:
    import trtls.cli.route_lifecycle as route
    from trtls.cli.usage import JsonErrors

    if args.json:
        args.format = "json"
    if args.format == "json":  # the reply is JSON: so is an error (one record on stdout, the text on stderr)
        JsonErrors.enabled = True

    return int(getattr(route, name)(args))
