"""What a reduction leaves under `.trtls/reduce/<id>/`, each file written atomically: `minimal.onnx` (the smallest
model that still fails the same way), `result.json` (the rule, the failure it reproduces, the cause, the nodes kept,
every trial), and the trial models in `trials/` (the failing ones are kept; a trial's engine never is)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from trtls.builds.roots import evidence_error, state_root
from trtls.core.triage_records import RESULT_NAME, ReductionResult
from trtls.fs import Kind, atomic_write_bytes, atomic_write_text, ensure_folder, read_bytes, remove_file
from trtls.triage.reduce_build import Reduction
from trtls.triage.signature import describe
from trtls.triage.trials import Trial


def outcome_of(red: Reduction) -> str:
    """reduced | configuration | not_reduced (no smaller model fails the same way) | not_reproduced | cancelled |
    stopped (the trial budget) | failed (an error inside the reduction: `error` says it)."""
    if red.error and red.cause != "not_reproduced":
        return "failed"
    if red.cause == "not_reproduced":
        return "not_reproduced"
    if red.stopped_by is not None and red.stopped_by != "max_trials":
        return "cancelled"
    if red.cause == "configuration":
        return "configuration"
    if red.stopped_by == "max_trials":
        return "stopped"
    if red.cause == "model" and red.best is not None and red.best.nodes < red.original_nodes:
        return "reduced"
    return "not_reduced"  # nothing smaller failed the same way: never said as `reduced`


def headline(red: Reduction) -> str:
    """The one line every face shows: `reduce demo · trial 7 · 244 → 1 nodes · still fails`."""
    nodes = f"{red.original_nodes} → {red.best.nodes} nodes" if red.best is not None else f"{red.original_nodes} nodes"
    measured = [t for t in red.trials if t.outcome not in (None, "cancelled")]  # a cancelled trial is no verdict
    if red.best is not None or red.cause == "configuration":
        state = " · still fails"
    elif red.cause is None and red.stopped_by is not None:  # stopped before any cause: not "does not reproduce"
        state = " · stopped"
    elif measured and red.cause is None:  # running: what the last trial found
        state = " · still fails" if measured[-1].still_fails else " · does not reproduce"
    else:
        state = " · does not reproduce" if red.cause == "not_reproduced" else ""
    return f"reduce {red.engine} · trial {len(red.trials)} · {nodes}{state}"


def min_good(red: Reduction) -> Trial | None:
    """Polygraphy's `--min-good`: a model near the minimal one that builds — of the candidates whose build succeeded
    (no failure at all: measured in this run, or in the stopped one a resume replays, whose candidate is cut again
    and written here), the one nearest the minimal model in nodes, the larger on a tie — so a resumed reduction
    names the one an uninterrupted reduction names. None when there is no minimal model or no candidate built."""
    if red.best is None:
        return None
    built = [t for t in red.trials if t.outcome == "built" and t.step not in ("confirm", "settings")]
    return min(built, key=lambda t: (abs(t.nodes - red.best.nodes), -t.nodes), default=None)


def bisect_bound(nodes: int) -> int:
    """The issue's bound for the two bisections: 2 × ⌈log2(nodes)⌉."""
    return 2 * math.ceil(math.log2(max(nodes, 2)))


def result_record(red: Reduction, recipe: Path, onnx: Path) -> ReductionResult:
    """The reduction's result.json, as its model (validated: a writer that drifts from it fails here)."""
    best = red.best
    # why the settings the recipe changes were not put back, said under every cause that kept the model
    not_tried = f" ({red.settings_not_tried})" if red.settings_not_tried else ""
    cause_text = {
        "configuration": (
            "the settings are the cause: "
            + (
                ", ".join(f"{k} = {v!r}" for k, v in red.cause_settings.items()) + " (without it the minimal model "
                "builds)"
                if red.cause_settings
                else "the model's first node alone fails the same way"
            )
        ),
        "model": "the model is the cause: the minimal model keeps the node(s) below"
        + ("" if red.settings_changed else " (the recipe changes no builder setting)")
        + not_tried,
        "not_reproduced": red.error or "the failure did not reproduce",
        "not_reduced": f"no smaller model fails the same way: every cut built or failed otherwise, so the whole "
        f"model ({red.original_nodes} nodes) is the smallest failing one"
        + ("" if red.settings_changed else " (the recipe changes no builder setting)")
        + not_tried,
    }.get(red.cause or "", "no cause found before the stop")
    if red.cause is None and best is not None and red.stopped_by is not None:  # a failing model, no cause measured
        cause_text = (
            "the stop came before the settings the recipe changes ("
            + ", ".join(sorted(red.settings_changed))
            + ") were put back: whether the model or one of them is the cause was not checked; the smallest "
            "failing model found so far is below"
        )
    outcome = outcome_of(red)
    if outcome == "failed":
        cause_text = red.error or cause_text
    elif outcome == "not_reduced" and red.cause == "model":  # a candidate as large as the model is no reduction
        cause_text = (
            f"no smaller model fails the same way: the whole model ({red.original_nodes} nodes) is kept{not_tried}"
        )
    probe = red.shape_probe
    if probe is not None and probe.reason is not None:  # the fallback: why some cuts could not be made
        cause_text += f"; {probe.text} (a tensor whose shape it could not infer is never a cut's input or output)"
    by_step: dict[str, int] = {}
    for t in red.trials:
        by_step[t.step] = by_step.get(t.step, 0) + 1
    record: dict[str, Any] = {
        "kind": "reduction",
        "id": red.id,
        "engine": red.engine,
        "recipe": str(recipe),
        "onnx": str(onnx),
        "outcome": outcome,
        "error": red.error if outcome == "failed" else None,  # what went wrong inside, and while doing what
        "errorCode": red.error_code if outcome == "failed" else None,
        "headline": headline(red),
        "rule": red.rule,
        "shapeProbe": probe,  # which probe gave every tensor's shape (ONNX Runtime, or shape inference and why)
        # where the failure pattern came from: "argument" (--fail-regex, failRegex: it wins), "recipe"
        # ([engines.NAME.triage] fail_regex), or None (the classified failure, no pattern)
        "failRegex": red.fail_regex or None,
        "failRegexFrom": red.fail_regex_from,
        "failure": red.target,
        "failureText": describe(red.target) if red.target else None,
        "cause": red.cause,
        "causeText": cause_text,
        "causeSettings": red.cause_settings,
        "settingsNotTried": red.settings_not_tried,  # why the settings the recipe changes were not put back
        "stoppedBy": red.stopped_by,
        # the stop's bound, as a state: the trial running at the stop is the last one (ended cooperatively), no
        # trial starts after it, and `minimal` is the smallest failing model found before it
        "stoppedDuringTrial": red.stopped_during_trial,
        "trialsAtStop": red.trials_at_stop,
        "originalNodes": red.original_nodes,
        "minimalPath": None if best is None else str(red.folder / "minimal.onnx"),
        "minimal": None
        if best is None
        else {
            "path": "minimal.onnx",
            "nodes": best.nodes,
            "nodeNames": best.node_names,
            "inputs": [i.name for i in best.model.graph.input],
            "outputs": [o.name for o in best.model.graph.output],
            "profiles": best.profiles,
        },
        # the largest passing model near the failing one (Polygraphy's --min-good): a candidate that built
        "minGood": None
        if (good := min_good(red)) is None
        else {"path": "min_good.onnx", "trial": good.index, "nodes": good.nodes, "step": good.step},
        # the user's own failed build of the same engine key, reused as the first trial (not built again)
        "reusedBuild": next((t.build_id for t in red.trials if t.reused), None),
        "trialsUsed": len(red.trials),
        "trialsBuilt": red.builds,
        "resumedFrom": red.resumed_from,
        "resumeNote": red.resume_note,
        # what `trtls reduce --resume` continues from: the model's and the engine's hashes, the smallest failing
        # candidate and every verdict so far (a candidate's key → its outcome); the search replays them, not rebuilds
        "resume": {
            "modelSha256": red.model_sha256,
            "recipeSha256": red.recipe_sha256,
            "failure": red.target,
            "smallest": None if best is None else {"nodes": best.nodes, "nodeNames": best.node_names},
            "verdicts": red.verdicts,
        },
        "trialsByStep": by_step,
        "bisectBound": bisect_bound(red.original_nodes),
        "trials": [t.record() for t in red.trials],
    }
    return ReductionResult.model_validate(record)


def write_evidence(red: Reduction, recipe: Path, onnx: Path) -> ReductionResult:
    """Write the reduction's evidence inside the recipe's folder (`.trtls` found by the path's text: a `.trtls` or
    `.trtls/reduce` swapped for a symlink is refused at the write). Never raises for the filesystem: a file that
    cannot be written (a full disk, a read-only folder, a symlink) is said in `evidenceError` as a located TRT413
    line, and what was written stays."""
    result = result_record(red, recipe, onnx)
    root = state_root(red.folder)
    # a folder that cannot be made: the first record the write would have made is the one named (minimal.onnx, or,
    # with no minimal model, result.json itself)
    path = red.folder / ("minimal.onnx" if red.best is not None else RESULT_NAME)
    try:
        ensure_folder(red.folder, within=root)
        if red.best is not None:
            path = red.folder / "minimal.onnx"
            atomic_write_bytes(path, red.best.model.SerializeToString(), kind=Kind.evidence, within=root)
        good = min_good(red)
        if good is not None:  # its candidate is still in trials/ (removed below with the other passing ones)
            path = red.folder / "min_good.onnx"
            data = read_bytes(red.trial_dir / f"{good.index:03d}.onnx", limit=None, within=root)  # written by us
            atomic_write_bytes(path, data, kind=Kind.evidence, within=root)
        for t in red.trials:  # keep the failing candidates (evidence), drop the others
            path = red.trial_dir / f"{t.index:03d}.onnx"
            if not t.still_fails:
                remove_file(path, kind=Kind.evidence, within=root)
        path = red.folder / RESULT_NAME
        atomic_write_text(path, json.dumps(result.record(), indent=2, default=str), kind=Kind.evidence, within=root)
    except OSError as exc:
        return result.model_copy(update={"evidenceError": evidence_error(exc, path)})
    return result
