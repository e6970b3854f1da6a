"""`trtls gates` (run a route's gates), `trtls bundle inspect` (show a .bundle) and `trtls bundle promote`
(record a foreign bundle's digests), registered by trtls.cli.main.

Exit codes of `trtls gates`: 0 supported, 3 hold, 4 reject, 2 bad input (recipe errors are printed as
`file:line:col: CODE severity: message`). With `--gate N`, the exit code is the decision of the selected
gates; the route summary still says hold, since a route is supported only when all five gates pass.

`--record-baseline` (a person's decision, after review; never done by a normal run) writes this run's gate-5
measurement to `.trtls/routes/<route>/baseline.json`, unless the gates reject (see `run.run_gates`).
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from typing import TYPE_CHECKING, Any

from trtls.cli.common import finding_line
from trtls.cli.exits import DECISION_EXIT, EXIT_BAD_INPUT, EXIT_CTRL_C, EXIT_FAILED, EXIT_OK, EXIT_REJECT
from trtls.cli.usage import output_file, recipe_argument

if TYPE_CHECKING:
    from trtls.gates.run import RouteResult

_MARK = {"pass": "ok    ", "hold": "HOLD  ", "reject": "REJECT", "not_checked": "not checked"}
_BUNDLE_CHECK_EXITS = (
    "2 missing or unreadable file (no file, a directory, a FIFO), 4 verification failed (container, header, a digest "
    "or the sidecar)"
)


def _no_digest_cache(p: Any) -> None:
    """The option of every command that hashes a route's checkpoint."""
    p.add_argument(
        "--no-digest-cache", action="store_true", help="hash every checkpoint file, ignoring .trtls/digests.json"
    )


def register(subparsers: Any) -> None:
    g = subparsers.add_parser(
        "gates",
        help="run a route's acceptance gates (checkpoint → bundle)",
        epilog="exit codes: 0 supported, 1 supported but its evidence could not be written (TRT412), 2 bad input, "
        "3 hold, 4 reject (with --gate: the selected gates' decision), "
        "130 cancelled (Ctrl-C or SIGTERM: the run stops before the next gate; twice: at once)",
    )
    recipe_argument(g)
    g.add_argument("--route", help="route table to check (default: the only route)")
    g.add_argument("--gate", type=int, action="append", choices=range(1, 6), help="run only this gate (repeatable)")
    g.add_argument(
        "--format", choices=("text", "json", "sarif", "junit"), default="text", help="report format (default: text)"
    )
    g.add_argument("--output", "-o", type=output_file, help="write the report here (atomically) instead of stdout")
    _no_digest_cache(g)
    g.add_argument(
        "--record-baseline",
        action="store_true",
        help="after review: record this run's gate-5 measurement as the route's performance baseline (not when the "
        "gates reject)",
    )
    g.set_defaults(func=cmd_gates)

    b = subparsers.add_parser("bundle", help="work with .bundle files")
    bsub = b.add_subparsers(dest="bundle_command", required=True)
    for name, what, done, json_help, func in (
        (
            "inspect",
            "show a bundle's header, sections and digests",
            "shown and verified",
            "the inspection",
            cmd_bundle_inspect,
        ),
        (
            "verify",
            "verify a bundle (container, header, digests, sidecar); exit 0 only when it verifies",
            "verified",
            "the verdict and problems",
            cmd_bundle_verify,
        ),
    ):
        c = bsub.add_parser(name, help=what, epilog=f"exit codes: 0 {done}, {_BUNDLE_CHECK_EXITS}")
        c.add_argument("file", help="the .bundle file")
        c.add_argument("--json", action="store_true", help=f"print {json_help} as one JSON object")
        c.set_defaults(func=func)
    pr = bsub.add_parser(
        "promote",
        help="verify a bundle trtls did not write (e.g. native `trtmc build` output) and record its digests in a "
        "sidecar",
        epilog="exit codes: 0 recorded, 2 missing or unreadable file, 4 fails verification (nothing written)",
    )
    pr.add_argument("file", help="the .bundle file to verify and record")
    pr.add_argument(
        "--replace",
        action="store_true",
        help="re-record after an intended change (the bundle no longer matches its sidecar)",
    )
    pr.set_defaults(func=cmd_bundle_promote)

    # `trtls route build`: the parser is here and the route machinery is imported only when it runs, so every
    # other command (a `trtls build` above all) does not pay for importing it (~0.3–1 s).
    r = subparsers.add_parser("route", help="build a route's bundle (checkpoint → ONNX → engine → .bundle + SBOM)")
    rsub = r.add_subparsers(dest="route_command", required=True)
    rb = rsub.add_parser(
        "build",
        help="export ONNX, build the engine and write the bundle, sidecar and SBOM",
        epilog="exit codes: 0 bundle written, 1 build failed, 2 bad input, 4 gate 1 refuses the checkpoint, "
        "130 cancelled (Ctrl-C), 137 forced/killed",
    )
    recipe_argument(rb)
    rb.add_argument("--route", help="route table to build (default: the only route)")
    rb.add_argument(
        "--unverified-checkpoint",
        action="store_true",
        help="build even when gate 1 rejects the checkpoint (pickle, changed weights, branch revision): warns loudly",
    )
    _no_digest_cache(rb)
    _json_errors(rb, "the build's events, its summary, then the route's result as JSON lines")
    rb.set_defaults(func=cmd_route_build)
    lk = rsub.add_parser(
        "lock",
        help="after reviewing a route's checkpoint: record every file's sha256 in trtls.lock.json (the gates verify "
        "it)",
        epilog="exit codes: 0 locked, 2 bad input, 4 a route cannot be locked as it is (nothing written for it)",
    )
    recipe_argument(lk)
    lk.add_argument("--route", action="append", help="route to lock (repeatable; default: every route)")
    _no_digest_cache(lk)
    _json_errors(lk, "each route locked as one JSON line")
    lk.set_defaults(func=cmd_route_lock)
    from trtls.cli.route_dialect import register_lifecycle

    register_lifecycle(rsub)


def _json_errors(p: argparse.ArgumentParser, what: str) -> None:
    """`--json` of a route command: what it prints, and every error as one JSON record on stdout (`{"type": "error",
    "code", "message", "file", "line", "col"}`, cli/usage.emit_error), the text on stderr, the exit code the same."""
    p.add_argument("--json", action="store_true", help=f"print {what}; every error as a JSON line too (on stdout)")


def cmd_route_build(args: argparse.Namespace) -> int:
    from trtls.cli.route import cmd_route_build as run

    return run(args)


def cmd_route_lock(args: argparse.Namespace) -> int:
    from trtls.cli.route import cmd_route_lock as run

    return run(args)


def cmd_gates(args: argparse.Namespace) -> int:
    from trtls.cli.common import load_or_report
    from trtls.cli.route import chosen_or_exit

    loaded = load_or_report(args.recipe)
    if loaded is None:
        return EXIT_BAD_INPUT
    chosen = chosen_or_exit(loaded, args.route)
    if isinstance(chosen, int):
        return chosen
    name = chosen[0]
    if args.record_baseline and args.gate and 5 not in args.gate:
        print("trtls gates: --record-baseline needs gate 5 (it records gate 5's measurement)", file=sys.stderr)
        return EXIT_BAD_INPUT
    from trtls.gates.run import junit_of, run_gates, sarif_of

    def progress(gate: int, text: str) -> None:
        if args.format == "text" and args.output is None:
            print(f"… {text}", file=sys.stderr, flush=True)

    stop = GatesStopKeys()
    try:
        result = run_gates(
            loaded,
            name,
            args.gate,
            progress,
            stop.requested,
            use_digest_cache=not args.no_digest_cache,
            record_baseline=args.record_baseline,
        )
    finally:
        stop.restore()
    if result.baseline is not None:
        b = result.baseline
        if b["recorded"]:
            m = b["measurement"]
            rss = "n/a" if m.get("peak_rss_mib") is None else f"{m['peak_rss_mib']:.1f} MiB"
            print(
                f"baseline recorded: {b['path']} (p95 {m['p95_ms']:.4f} ms, peak RSS {rss}); the next run compares "
                "against it",
                file=sys.stderr,
            )
        else:
            print(f"baseline not recorded: {b['reason']}", file=sys.stderr)
    if args.format == "json":
        text = result.summary.text()
    elif args.format == "sarif":
        text = json.dumps(sarif_of(loaded, result), indent=2, default=str) + "\n"
    elif args.format == "junit":
        text = junit_of(result)
    else:
        text = render_text(loaded, result)
    if args.output:
        from trtls.cli.output import write_output

        fmt = {"json": "json", "sarif": "json", "junit": "xml"}.get(args.format, "text")
        refused = write_output(args.output, text, fmt=fmt, recipes=(loaded.path,))
        if refused is not None:
            return refused
        print(f"{result.decision}: report written to {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    if result.cancelled:
        return EXIT_CTRL_C
    code = DECISION_EXIT[result.gates_decision if args.gate else result.decision]
    unrecorded = [f for f in result.findings if f.code == "TRT412"]
    for f in unrecorded:  # the run's evidence could not be written: said here too, not only as an editor diagnostic
        print(finding_line(loaded, f), file=sys.stderr)
    return EXIT_FAILED if unrecorded and code == EXIT_OK else code  # a pass `route promote` cannot see is not earned


class GatesStopKeys:
    """Ctrl-C or SIGTERM during `trtls gates`: the run stops before its next gate (`run_gates` polls `requested`; a
    checkpoint hash in progress stops at once), writes its evidence as cancelled and the command exits 130. Without
    this, a Ctrl-C was a KeyboardInterrupt raised wherever Python was, inside ONNX Runtime's calls too: a traceback,
    exit -2, once a segmentation fault. A second Ctrl-C ends the process at once (the default handler)."""

    def __init__(self) -> None:
        self.source: str | None = None
        self._previous: dict[int, Any] = {}
        if threading.current_thread() is threading.main_thread():  # (signals reach the main thread only)
            self._previous = {s: signal.signal(s, self._on_signal) for s in (signal.SIGINT, signal.SIGTERM)}

    def _on_signal(self, signum: int, frame: object) -> None:
        if self.source is not None and signum == signal.SIGINT:
            from trtls.fs.kill import signal_self

            signal.signal(signal.SIGINT, signal.SIG_DFL)
            signal_self(signal.SIGINT)
            return
        if self.source is None:
            self.source = "ctrl_c" if signum == signal.SIGINT else "service_shutdown"
            print("\nstopping the gates before the next one (Ctrl-C again to end now)…", file=sys.stderr, flush=True)

    def requested(self) -> bool:
        return self.source is not None

    def restore(self) -> None:
        for s, handler in self._previous.items():
            signal.signal(s, handler)


def render_text(loaded: Any, result: RouteResult) -> str:
    from trtls.core.display import gates_verdict
    from trtls.core.gate_result import GATE_NAMES
    from trtls.core.loads_on import runtime_target_text

    lines = [f"route {result.route_name}"]
    for gate in sorted({c.gate for c in result.checks}):
        lines.append(f"gate {gate} — {GATE_NAMES[gate]}: {result.gate_status(gate)}")
        for c in (c for c in result.checks if c.gate == gate):
            where = f"  [{loaded.location(c.finding())}]" if c.status != "pass" and c.path else ""
            waived = f" — waived: {c.waived}" if c.waived else ""
            lines.append(f"  {_MARK[c.status]} {c.code} {c.name}: {c.message}{waived}{where}")
    s = result.summary
    lines.append(
        f"decision: {result.decision}"
        + (f" (selected gates: {result.gates_decision})" if result.decision != result.gates_decision else "")
        + f" · revision {s.checkpoint_revision}"
        + f" · runtime {runtime_target_text(s.runtime_target, s.runtime_target_loads_on)}"
        + f" · validation {s.validation_status}"
        + f" · canary {s.canary_status} (canary inputs {s.canary_inputs_status})"
        + f" · rollback {s.rollback_status}"
    )
    if s.runtime_note:
        lines.append(f"note: {s.runtime_note}")
    for reason in s.hold_reasons:
        lines.append(f"holds: {reason}")
    promotion = s.promotion
    if promotion is not None:
        lines.append(f"promotion: {promotion.message}")
        lines += [f"promotion: revalidate: {r}" for r in promotion.reasons]
    if result.summary_path:
        lines.append(f"evidence: {result.summary_path}")
    # the sentence the run ends with, in the editor's words (trtls.core.display.gates_verdict)
    verdict = gates_verdict(result.route_name, result.decision, result.cancelled, findings="the findings above")
    lines.append(verdict["text"])
    return "\n".join(lines) + "\n"


def cmd_bundle_inspect(args: argparse.Namespace) -> int:
    """Show the bundle and its verification. Exit 0 verified, 4 verification failed, 2 missing or unreadable
    (no file, a directory, a FIFO or other non-regular file, a read error): never 0 for a bundle that fails."""
    import trtls.bundle as bundle

    info = bundle.inspect_json(args.file)
    if args.json:
        print(json.dumps(info, indent=2, default=str))
    else:
        sys.stdout.write(bundle.inspect_text(args.file) if info["header"] is not None else "")
    return _verdict_exit(args.file, info, quiet=args.json or info["header"] is not None)


def cmd_bundle_verify(args: argparse.Namespace) -> int:
    """`trtls bundle verify FILE`: the verification verdict only; exit codes as `bundle inspect`."""
    import trtls.bundle as bundle

    info = bundle.inspect_json(args.file)
    if args.json:
        print(json.dumps({k: info[k] for k in ("path", "ok", "size", "file_sha256", "problems")}, indent=2))
    elif info["ok"] and info.get("trtls") is None and info.get("sidecar") is None:
        # the container holds together, but no digest recorded anywhere says what its bytes should be: said so
        print(
            f"{args.file}: structure verified (sha256 {info['file_sha256']}); contents not_checked: no trtls record "
            "and no sidecar holds digests to compare its bytes with (trtls bundle promote records them)"
        )
    elif info["ok"]:
        print(f"{args.file}: verified (sha256 {info['file_sha256']})")
    return _verdict_exit(args.file, info, quiet=bool(args.json))


def _verdict_exit(path: str, info: dict[str, Any], *, quiet: bool) -> int:
    import trtls.bundle as bundle

    if info["ok"]:
        return 0
    unreadable = all(p["check"] == bundle.CHECK_IO for p in info["problems"])
    if not quiet:
        for p in info["problems"]:
            print(f"{path}: {p['check']}: {p['message']}", file=sys.stderr)
    print(
        f"{path}: {'unreadable' if unreadable else 'verification FAILED'} ({len(info['problems'])} problem(s))",
        file=sys.stderr,
    )
    return EXIT_BAD_INPUT if unreadable else EXIT_REJECT


def cmd_bundle_promote(args: argparse.Namespace) -> int:
    """Exit 0 recorded, 4 the bundle fails verification (nothing written), 2 missing or unreadable file."""
    import trtls.bundle as bundle

    try:
        record = bundle.promote_foreign(args.file, replace=args.replace)
    except bundle.BundleError as exc:
        print(f"{args.file}: not promoted: {exc}", file=sys.stderr)
        if all(p.check == bundle.CHECK_IO for p in exc.problems):
            return EXIT_BAD_INPUT  # missing or unreadable: bad input, not a bundle that failed verification
        digest_checks = (bundle.CHECK_FILE_DIGEST, bundle.CHECK_SECTION_DIGEST, bundle.CHECK_SIDECAR)
        if not args.replace and any(p.check in digest_checks for p in exc.problems):
            print("  if the change was intended, re-record with --replace", file=sys.stderr)
        return EXIT_REJECT
    except OSError as exc:
        print(f"{args.file}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    sidecar = bundle.sidecar_path(args.file)
    print(f"{args.file}: {record['origin']} bundle, {record['size']} bytes, sha256 {record['file_sha256']}")
    print(
        f"  {len(record['section_sha256'])} section digests recorded in {sidecar}; gate 3 verifies against them from "
        "now on"
    )
    return 0
