"""`trtls reduce --diverge` / `--route` (docs/triage.md): where a converted model, or a second given model
(`--candidate`), leaves tolerance — the search run off the event loop, stoppable (Ctrl-C, --timeout), and its record
as lines: the first tensor out of tolerance, each --fix round, gate 4 run again, the TensorRT layers.

Exit codes: 0 a diverging tensor found (and, with --fix, fixed), 1 none found, not fixed, or the route's parity gate
still rejects, 2 bad input, 124 stopped by --timeout, 130 stopped by Ctrl-C.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import TYPE_CHECKING

from trtls.cli.common import install_stop_keys, report_error
from trtls.cli.exits import EXIT_BAD_INPUT, EXIT_CTRL_C, EXIT_FAILED, EXIT_OK, EXIT_TIMEOUT
from trtls.core.terminal_text import terminal_safe

if TYPE_CHECKING:
    from trtls.core.recipe import LoadedRecipe
    from trtls.core.triage_records import DivergenceResult, DivergenceRound, ParityRerun, TensorrtLayers


FLAGS = {name: f"--{name}" for name in ("candidate", "reference", "fix", "route", "tensorrt", "engine", "rtol")}


async def diverge(loaded: LoadedRecipe, args: argparse.Namespace) -> int:
    from pathlib import Path

    from trtls.app.results import Refused
    from trtls.app.triage import request_divergence
    from trtls.cli.store_lookup import report_refused

    pair = args.candidate is not None
    asked = await request_divergence(
        loaded,
        engine=args.engine,
        route=args.route,
        candidate=Path(args.candidate) if pair else None,
        reference=Path(args.reference) if args.reference else None,
        fix=args.fix,
        tensorrt=args.tensorrt,
        inputs=Path(args.inputs) if args.inputs else None,
        rtol=args.rtol,
        spelled=FLAGS,
    )
    if isinstance(asked, Refused):
        return report_refused(loaded, asked)
    run = asked
    token = run.token

    class _Token:
        def cancel(self, source: str) -> bool:
            return bool(token.request(source))

        def force(self) -> None:
            token.request("ctrl_c")

    install_stop_keys(_Token(), "the divergence search", quiet=args.json)
    if args.timeout is not None:  # as the build reduction: a stop with source ci_timeout, exit 124
        asyncio.get_running_loop().call_later(args.timeout, token.request, "ci_timeout")
    result = await run.run()
    if run.error_code is not None:  # a model, inputs or a name the search could not use: bad input
        report_error(run.error_code, run.error or "", str(loaded.path))
        return EXIT_BAD_INPUT
    if run.error is not None:
        report_error("TRT983", run.error, str(loaded.path))
        return EXIT_FAILED
    from trtls.triage.diverge import error_text

    stopped = {"ci_timeout": "--timeout", "ctrl_c": "Ctrl-C"}.get(result.cancelSource or "", "a stop")
    if args.json:
        print(json.dumps(result.record(), allow_nan=False))  # standard JSON: an overflow is null + "overflow": true
    else:
        first = result.firstDiverging
        rtol = result.rangeRtol or 0.0
        if first is None and result.cancelled:
            print(f"stopped by {stopped} before the comparison ended: no result")
        elif first is None:
            model = "the candidate model" if pair else "the converted model"
            print(f"no tensor leaves tolerance: {model} stays within it on these inputs{_not_compared(result)}")
        else:
            max_abs = "inf/NaN" if first.maxAbsError is None else f"{first.maxAbsError:.3g}"
            print(
                f"first tensor out of tolerance: {first.tensor} from node {first.node} ({first.op}): "
                f"{error_text(first, rtol)}, max |error| {max_abs}"
            )
            for nxt in result.rounds[0].next:
                print(f"  then {nxt.tensor} ({nxt.op}): {error_text(nxt, rtol)}")
            if not pair:
                tried = args.fix and not result.cancelled  # a stopped --fix measured no exclusion: the first node
                print(f"proposal: [precision] exclude_nodes = {result.excludeNodes if tried else [first.node]}")
        unchecked = _not_checked(result)
        if unchecked:
            print(unchecked)
        if args.fix:
            for line in _round_lines(result.rounds):
                print(line)
            last = result.rounds[-1] if result.rounds else None
            print(
                f"fixed: with exclude_nodes = {result.excludeNodes} the outputs are within tolerance"
                if result.fixed
                else "not fixed within the rounds: no exclusion was measured to pass"
                if result.fixed is False
                else "whether an exclusion fixes it was not checked: the stop came first"
                if result.cancelled or last is None or not last.outputsNotChecked
                else terminal_safe(
                    "whether an exclusion fixes it was not checked: the output "
                    f"{', '.join(last.outputsNotChecked)} could not be compared (no finite reference value, or the "
                    "converted model lacks it or makes it in another shape)"
                )
            )
        if result.parityRerun is not None:
            print(_rerun_line(result.parityRerun))
        if result.cancelled and first is not None:
            print(f"stopped by {stopped}")
        if args.tensorrt and result.tensorrt is not None:
            print(_tensorrt_line(result.tensorrt, rtol))
        print(f"evidence: {result.folder}/divergence.json", file=sys.stderr)
    if result.cancelled:
        return EXIT_TIMEOUT if result.cancelSource == "ci_timeout" else EXIT_CTRL_C
    found = result.firstDiverging is not None
    rerun = result.parityRerun
    if rerun is not None and rerun.status == "ran" and not rerun.parityPasses:
        return EXIT_FAILED  # the outputs passed the search's comparison but not the route's parity gate
    return EXIT_OK if found and (result.fixed or not args.fix) else EXIT_FAILED


def _not_compared(result: DivergenceResult) -> str:
    """Two given models: the reference's tensors the comparison left out (absent from the candidate, not float, or
    shaped otherwise) — "within it" is said of the compared ones only."""
    if not result.notCompared:
        return ""
    shown = (result.notComparedNames or [])[:5]
    names, more = ", ".join(shown), ", …" if result.notCompared > len(shown) else ""
    return terminal_safe(
        f" ({result.comparedTensors} tensors compared; {result.notCompared} of the reference's not compared: "
        f"{names}{more})"
    )


def _not_checked(result: DivergenceResult) -> str:
    """The last round's tensors whose reference holds only inf/NaN, and its outputs the other side lacks or makes in
    another shape: nothing was compared, so they are not_checked, never "within tolerance" (empty when none)."""
    last = result.rounds[-1] if result.rounds else None
    names = [t.tensor for t in last.tensors if t.withinTolerance is None] if last else []
    lines = []
    if names:
        shown = ", ".join(names[:5]) + (", …" if len(names) > 5 else "")
        lines.append(f"not_checked ({len(names)}): the reference holds only inf/NaN in {shown}")
    missing = [o for o in (last.outputsNotChecked or []) if o not in names] if last else []
    if missing:
        shown = ", ".join(missing[:5]) + (", …" if len(missing) > 5 else "")
        lines.append(
            f"not_checked ({len(missing)}): the output {shown} could not be compared (the other model lacks it or "
            "makes it in another shape)"
        )
    return terminal_safe("\n".join(lines))


def _round_lines(rounds: list[DivergenceRound]) -> list[str]:
    """Each --fix round after the first: what it excluded and why, and the outputs' worst range error."""
    lines = []
    for index, r in enumerate(rounds[1:], start=2):
        error = r.outputRangeError
        measured = "overflow" if error is None else f"{error:.3g}"
        reason = r.reason or ""
        why = {"widened_upstream": "widened upstream", "first_diverging": "the first diverging node"}.get(
            reason, reason
        )
        worse = " — worse than before it" if r.worseThanBefore else ""
        lines.append(
            f"  round {index}: exclude_nodes = {r.excludeNodes} (+{r.added or []}: {why}): outputs' range "
            f"error {measured}{worse}{', within tolerance' if r.outputsPass else ''}"
        )
    return lines


def _rerun_line(rerun: ParityRerun) -> str:
    """Gate 4 run again with the fix: its decision and each parity.tolerance check, or why it did not run."""
    added = rerun.excludeNodesAdded or []
    if rerun.status != "ran":
        return f"gate 4 not re-run ({rerun.status}): {'stopped' if rerun.reason is None else rerun.reason}"
    model = rerun.runtimeModel
    ran = f"the what-if bundle {rerun.bundle}, its model.onnx {model}" if rerun.bundle else ""
    ran = ran or f"the converted model {model}"
    lines = [f"gate 4 re-run with exclude_nodes += {added} ({ran}): {rerun.decision}"]
    for c in rerun.checks or []:
        if c.name.startswith("parity.tolerance") or c.status != "pass":
            waived = f" — waived: {c.waived}" if c.waived else ""
            lines.append(f"  {c.status:<11} {c.code} {c.name}: {c.message}{waived}")
    return "\n".join(lines)


def _tensorrt_line(trt: TensorrtLayers, rtol: float) -> str:
    """The TensorRT engine's layer-wise comparison in one line: `not_checked: <why>` is not a verdict."""
    if trt.status == "not_checked":
        return f"tensorrt layers: not_checked: {trt.reason}"
    if trt.status != "compared":
        return f"tensorrt layers: {trt.status}: {trt.reason}"
    from trtls.triage.diverge import error_text

    first = trt.firstDiverging
    if first is None:
        return f"tensorrt layers: {trt.markedOutputs} layer outputs marked, every tensor within tolerance"
    return f"tensorrt layers: first tensor out of tolerance: {first.tensor} from node {first.node}: " + error_text(
        first, rtol
    )
