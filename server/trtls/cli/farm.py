"""`trtls farm up|down|status`: a warm local farm that `address = "local"` runs reuse (docs/farm.md).

`up` starts one persistent local Ray head (its CPUs and labels from the options, or from a recipe's `[cluster]`
table) on 127.0.0.1 only, with Ray's token authentication on and its token in a 0600 file, and returns once it
answers (a Ray without token authentication is refused, TRT237); every later `trtls build --matrix` and the
language server on this machine connect to it instead of starting an embedded instance each time. `down` stops
exactly that head's Ray processes, and only once the head proves to be the one `up` started. `status` says whether
it runs, without loading Ray.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from trtls.cli.exits import EXIT_BAD_INPUT, EXIT_OK
from trtls.core.cgroups import usable_cpus
from trtls.core.terminal_text import terminal_safe

EXITS = "exit codes: 0 done (status: running), 1 it failed (status: not running), 2 bad input"


def register(subparsers: Any) -> None:
    f = subparsers.add_parser(
        "farm",
        help="a warm local Ray head that repeated farm runs reuse (up, down, status)",
        description='A persistent local Ray head for recipes with [cluster] address = "local": runs connect to '
        "it instead of starting an embedded instance each time.",
        epilog=EXITS,
    )
    sub = f.add_subparsers(dest="farm_command", required=True, metavar="ACTION")
    up = sub.add_parser("up", help="start the warm local farm (or say that it runs)", epilog=EXITS)
    up.add_argument("recipe", nargs="?", help="take num_cpus and labels from this recipe's [cluster] table")
    up.add_argument("--num-cpus", type=int, help="CPUs of the farm's node (default: the recipe's, else all)")
    up.add_argument(
        "--workers",
        type=int,
        metavar="N",
        help="warm node workers to keep, TensorRT imported (default: one per CPU; 0: none)",
    )
    up.add_argument("--label", action="append", default=[], metavar="KEY=VALUE", help="a node label (repeatable)")
    up.set_defaults(func=cmd_up)
    down = sub.add_parser("down", help="stop the warm local farm and every Ray process it started", epilog=EXITS)
    down.set_defaults(func=cmd_down)
    st = sub.add_parser("status", help="whether the warm local farm runs, where, with what", epilog=EXITS)
    st.add_argument("--json", action="store_true", help="one JSON object")
    st.set_defaults(func=cmd_status)


def _recipe_cluster(arg: str) -> Any:
    from trtls.cli.common import find_recipe
    from trtls.core.recipe import load_recipe

    loaded = load_recipe(find_recipe(arg))
    return loaded.recipe.cluster if loaded.recipe is not None else None


def cmd_up(args: argparse.Namespace) -> int:
    from trtls.builds.farm import local_guard, warm_farm

    problem = local_guard.version_problem(local_guard.installed_ray())
    if problem is not None:
        print(f"trtls farm up: {problem}", file=sys.stderr)
        return 1

    for option, value, least in (("--num-cpus", args.num_cpus, 1), ("--workers", args.workers, 0)):
        if value is not None and value < least:  # Ray refused a negative count only inside the head, in its log
            print(f"trtls farm up: {option} {value}: must be at least {least}", file=sys.stderr)
            return EXIT_BAD_INPUT
    labels: dict[str, str] = {}
    num_cpus = args.num_cpus
    if args.recipe:
        table = _recipe_cluster(args.recipe)
        if table is None:
            print(f"trtls farm up: {args.recipe} has no [cluster] table", file=sys.stderr)
            return EXIT_BAD_INPUT
        labels.update(table.labels)
        num_cpus = num_cpus or table.num_cpus
    for item in args.label:
        key, sep, value = item.partition("=")
        if not sep or not key:
            print(f"trtls farm up: --label {item!r} is not KEY=VALUE", file=sys.stderr)
            return EXIT_BAD_INPUT
        labels[key] = value
    try:
        with warm_farm.up_lock():  # a second `farm up` at the same time waits here, then finds this one's head
            head = warm_farm.read_state()
            if head is not None and warm_farm.alive(head):
                print(f"already running: {head.describe()}")
                return EXIT_OK
            head = warm_farm.start(num_cpus or usable_cpus(), labels, workers=args.workers)
    except (RuntimeError, OSError) as exc:  # OSError: a state, token or log file the door refused or could not write
        print(f"trtls farm up: {terminal_safe(str(exc))}", file=sys.stderr)
        return 1
    print(
        f"started: {head.describe()}\nlistening on 127.0.0.1 only; token authentication on (token file "
        f"{head.token_path}, mode 0600)\nstate: {warm_farm.state_path()} · stop it with: trtls farm down"
    )
    return EXIT_OK


def cmd_down(args: argparse.Namespace) -> int:
    from trtls.builds.farm import warm_farm

    head = warm_farm.read_state()
    if head is None:
        print("no warm local farm is running")
        return EXIT_OK
    from trtls.fs.kill import process_alive

    # a state file whose pid is gone or runs another program is stale: forgotten, nothing signalled, and not a stop
    stale = not process_alive(head.pid) or not warm_farm.is_our_head(head.pid)
    try:
        why = warm_farm.stop(head)
    except OSError as exc:  # its state or token file could not be removed (the head itself has stopped)
        why = f"the head stopped, but {terminal_safe(str(exc))}"
    if why is not None:
        print(f"trtls farm down: {terminal_safe(why)}", file=sys.stderr)
        return 1
    if stale:
        print(
            f"no warm local farm was running: the state file named pid {head.pid}, which is not a farm head; "
            "the stale state was removed and nothing was signalled"
        )
        return EXIT_OK
    print(f"stopped the warm local farm (pid {head.pid})")
    return EXIT_OK


def cmd_status(args: argparse.Namespace) -> int:
    from trtls.builds.farm import warm_farm

    st = warm_farm.status()
    if args.json:
        print(json.dumps(st))
    elif not st["running"]:
        stale = " (a stale state file: its head is gone)" if "pid" in st else ""
        print(f"no warm local farm is running{stale}; start one with: trtls farm up")
    else:
        head = warm_farm.read_state()
        assert head is not None
        print(f"running: {head.describe()}\nstate: {st['state']}")
    return EXIT_OK if st["running"] else 1
