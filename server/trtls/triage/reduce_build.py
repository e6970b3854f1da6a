"""`trtls reduce`: a failing build reduced to the smallest model that still fails the same way.

The search is Polygraphy's `debug reduce --mode bisect` (its own `BisectMarker`) for the last node kept (the
candidate is the span up to it, every branch kept); then the first node kept, on that node's branch, is searched from
the end (`cut_search.search_from_end`: the last node alone, the last two, then a bisection); every step a real worker
build of the candidate (`trials`), judged by `signature.same_failure`. The cuts' new inputs get their shapes from
`shape_inference.probe_shapes`: ONNX Runtime, or, for a model it cannot run (a custom op), ONNX shape inference —
then a cut that needs a tensor inference has no facts for is not made (`Candidate.unknown`), and the record says
which probe it was and why (`shape_probe`). The first trial is the whole model as the recipe builds it — the user's
own failed build when its evidence has the same engine key (`user_build`), not built again. Then each setting the
recipe changes from its default is put back on the minimal model, one at a time: a setting without which the
minimal model builds is named as the cause (a recipe that changes none blames none, and neither does a parser
rejection: the parser runs before any builder setting applies).

A stop (any cancel source, `--timeout`, `--max-trials`) ends the current trial cooperatively and keeps the smallest
failing model found so far, with every verdict (`resume`). Everything is written atomically under
`.trtls/reduce/<id>/` (`evidence`). What goes wrong inside is recorded (`error`, TRT982/TRT983), never raised.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trtls.builds.roots import state_root
from trtls.builds.supervisor.job import state_dir
from trtls.core.build_config import flat_settings
from trtls.core.cancel import CancelToken
from trtls.core.recipe import LoadedRecipe
from trtls.core.summary_record import Summary
from trtls.core.triage_records import FailureSignature, ShapeProbeRecord, Verdict
from trtls.fs import Kind, atomic_write_bytes, ensure_folder
from trtls.fs.models import load_onnx
from trtls.triage.cut_search import bisect_cut, named_node, search_from_end, span_ends
from trtls.triage.signature import RULE, RULE_REGEX, failure_signature, same_failure
from trtls.triage.trials import Trial, TrialRunner


class Stop(Exception):
    """The reduction was asked to stop (cancel, timeout, trial budget)."""


# The modules a reduction imports and the extra that installs each (pyproject.toml's optional dependencies).
EXTRA_OF = {"onnxruntime": "gates", "polygraphy": "gates"}
MISSING_MODULE = "TRT982"
REDUCTION_FAILED = "TRT983"


def missing_module_text(name: str) -> str:
    """`trtls reduce needs onnxruntime, which is not installed here: pip install 'trtls[gates]'`."""
    extra = EXTRA_OF.get(name.split(".")[0])
    install = f"pip install 'trtls[{extra}]'" if extra else "pip install trtls (a dependency of trtls itself)"
    return f"trtls reduce needs {name}, which is not installed here: {install}"


def missing_modules() -> list[str]:
    """The modules a build reduction needs that cannot be imported here (each said with its extra, TRT982)."""
    missing = []
    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        missing.append("onnxruntime")
    try:
        from polygraphy.tools.debug.subtool.reduce import BisectMarker  # noqa: F401
    except ImportError:
        missing.append("polygraphy")
    return missing


@dataclass
class Reduction:
    id: str
    engine: str
    folder: Path
    max_trials: int = 40
    token: CancelToken = field(default_factory=CancelToken)
    trials: list[Trial] = field(default_factory=list)
    original_nodes: int = 0
    target: FailureSignature | None = None  # the failure every trial is compared with (triage.signature)
    best: Any = None  # the smallest Candidate that still fails
    best_path: Path | None = None
    cause: str | None = None  # model | configuration | not_reproduced | not_reduced
    cause_settings: dict[str, Any] = field(default_factory=dict)
    settings_changed: dict[str, Any] = field(default_factory=dict)  # what the recipe changes from the defaults
    settings_not_tried: str | None = None  # why no setting was put back although the recipe changes some
    stopped_by: str | None = None  # cancel source, or "max_trials"
    stopped_during_trial: int | None = None  # the trial whose build was running when the stop came (it is cancelled)
    trials_at_stop: int | None = None  # trials started when the stop came: no trial starts after it
    error: str | None = None
    error_code: str | None = None  # TRT982 a module is missing, TRT983 the reduction itself failed
    phase: str = "starting"  # what the reduction was doing (an error says it)
    rule: str = RULE
    fail_regex: list[str] = field(default_factory=list)  # --fail-regex: what the failure looks like, when unclassified
    fail_regex_from: str | None = None  # argument (--fail-regex, failRegex) | recipe ([engines.NAME.triage])
    # resume: what identifies the model and the recipe's engine, and every verdict so far (candidate key → fails)
    model_sha256: str | None = None
    recipe_sha256: str | None = None
    verdicts: dict[str, Verdict] = field(default_factory=dict)  # candidate key → its outcome, whether it still fails
    replay: dict[str, Verdict] = field(default_factory=dict)  # verdicts of the reduction this one resumes
    user_build: Summary | None = None  # the user's failed build of this engine key: the confirm trial's verdict
    shape_probe: ShapeProbeRecord | None = None  # which probe gave the tensors' shapes, and why (None: not probed)
    resumed_from: str | None = None
    resume_note: str | None = None  # why a resume asked for started over, or what it continued from

    @property
    def trial_dir(self) -> Path:
        return self.folder / "trials"

    @property
    def builds(self) -> int:
        """The trials that were built (a replayed verdict of a resumed reduction, or the user's own failed build
        reused as the first trial, is not a build)."""
        return sum(1 for t in self.trials if not t.replayed and not t.reused)


def _compute_indices(graph: Any) -> list[int]:
    """The nodes a marker walks: every node but `Constant` (constants come along with what reads them)."""
    return [i for i, n in enumerate(graph.nodes) if n.op_type != "Constant"]


def candidate_key(candidate: Any, settings: dict[str, Any] | None = None) -> str:
    """A short, stable name for a trial: the candidate's nodes and outputs (and a settings trial's reverted key)."""
    body = json.dumps([list(candidate.key[0]), list(candidate.key[1]), settings or {}], default=str)
    return hashlib.sha256(body.encode()).hexdigest()[:24]


def engine_sha256(eng: Any) -> str:
    """The engine's table as the recipe gives it (settings, profiles, builder module): a change is another search."""
    body = json.dumps(
        eng.model_dump(mode="json", exclude={"output", "timing_cache", "cancel_grace_s", "triage"}), sort_keys=True
    )
    return hashlib.sha256(body.encode()).hexdigest()


async def run_reduction(loaded: LoadedRecipe, engine: str, red: Reduction, runner: TrialRunner) -> Reduction:
    """Reduce; never raises for what goes wrong inside (a missing module, a model ONNX Runtime refuses, a cut that
    fails): `red.error` and `red.error_code` say it, with what the reduction was doing."""
    try:
        await _run_reduction(loaded, engine, red, runner)
    except ImportError as exc:
        name = getattr(exc, "name", None) or str(exc)
        red.error_code = MISSING_MODULE
        red.error = f"{missing_module_text(name)} ({type(exc).__name__}: {exc}; while {red.phase})"
    except Exception as exc:
        from trtls.triage.probe import ProfileShapesRejected  # (numpy: not imported where `trtls` starts)

        red.error_code = REDUCTION_FAILED
        red.error = f"the reduction failed while {red.phase}: {type(exc).__name__}: {exc}"
        if isinstance(exc, ProfileShapesRejected):  # a profile mistake: said as one, not as the reduction's failure
            red.error = str(exc)
    return red


async def _run_reduction(loaded: LoadedRecipe, engine: str, red: Reduction, runner: TrialRunner) -> Reduction:

    from trtls.builds.precision import input_digest
    from trtls.triage.shape_inference import probe_shapes
    from trtls.triage.subgraph import Whole, cut, load_graph, unknown_tensors

    eng = loaded.engine(engine)
    onnx_path = loaded.resolve(eng.onnx)
    red.phase = f"loading the model {onnx_path}"
    red.model_sha256 = red.model_sha256 or await asyncio.to_thread(input_digest, onnx_path)
    red.recipe_sha256 = engine_sha256(eng)
    model = load_onnx(onnx_path)  # external data from the model's own folder, as the parser reads it
    graph = load_graph(model)
    compute = _compute_indices(graph)
    red.original_nodes = len(graph.nodes)
    root = state_root(red.trial_dir)  # the recipe's folder: `.trtls/reduce/<id>/trials` stays inside it
    red.phase = f"making the reduction's folder {red.trial_dir}"
    ensure_folder(red.trial_dir, within=root)
    profiles = eng.job_profiles()
    tried: dict[str, Trial] = {}
    from trtls.core.build_config import BuilderSettings

    defaults = flat_settings(BuilderSettings())
    red.settings_changed = {k: v for k, v in flat_settings(eng.builder).items() if defaults.get(k) != v}

    def on_stop(source: str) -> None:  # on the loop: a trial is either running (its build cancelled) or not started
        red.trials_at_stop = len(red.trials)
        if runner.current is not None and red.trials:
            red.stopped_during_trial = red.trials[-1].index
            runner.current.cancel(source)

    red.token.on_request(on_stop)

    async def attempt(
        step: str, candidate: Any = None, *, path: Path | None = None, settings: Any = None, key: str | None = None
    ) -> Trial:
        if red.token.is_set:
            raise Stop
        if candidate is not None:
            key = candidate_key(candidate, settings)
            if key in tried:  # the same cut again (a marker can land on one): its verdict, not another build
                known = tried[key]
                if known.step == "confirm" and red.best is None:  # the model itself: the smallest failing one yet
                    red.best, red.best_path = candidate, onnx_path
                return known
        elif step == "confirm":
            key = "confirm"
        replayed = key is not None and key in red.replay and (step != "confirm" or red.target is not None)
        if not replayed and red.builds >= red.max_trials:
            red.stopped_by = "max_trials"
            raise Stop
        index = len(red.trials)
        shown = candidate or (red.best if settings is not None else None)
        trial = Trial(
            index,
            step,
            shown.nodes if shown else red.original_nodes,
            shown.first if shown else 0,
            shown.last if shown else len(graph.nodes) - 1,
            f"{red.id}.t{index:03d}",
        )
        red.trials.append(trial)
        red.phase = f"trial {index} ({step})"
        if candidate is not None:
            path = red.trial_dir / f"{index:03d}.onnx"
            atomic_write_bytes(path, candidate.model.SerializeToString(), kind=Kind.evidence, within=root)
        assert path is not None
        if replayed:  # a verdict the stopped reduction measured, for the same model, recipe and candidate
            assert key is not None
            trial.replayed, trial.outcome = True, red.replay[key].outcome
            trial.still_fails = red.replay[key].stillFails
        elif step == "confirm" and red.user_build is not None:  # the same build, measured by the user: not rebuilt
            summary = red.user_build
            trial.reused, trial.build_id = True, str(summary.buildId)
            trial.outcome, trial.failure = summary.outcome, summary.failure
            trial.seconds = float(summary.durationS or 0.0)
            red.target = failure_signature(summary, red.fail_regex or None)
        else:
            summary = await runner.build(trial, path, shown.profiles if shown else None, settings)
            if red.token.is_set and trial.outcome in ("cancelled", "forced", "killed"):
                raise Stop  # a trial the stop ended, cooperatively or not, has no verdict: never a failure target
            if trial.outcome in ("cancelled", "forced"):  # its own build stopped (its Stop in the Builds view): no
                red.trials_at_stop, red.stopped_during_trial = len(red.trials), trial.index  # verdict, never a pass
                red.token.request(summary.cancelSource or "api")  # the reduction stops there, as at any stop
                raise Stop
            trial.still_fails = red.target is not None and same_failure(red.target, summary)
            if red.target is None:
                red.target = failure_signature(summary, red.fail_regex or None)
        if key is not None and red.target is not None:
            red.verdicts[key] = Verdict(outcome=trial.outcome, stillFails=trial.still_fails)
        if candidate is not None:
            tried[key or ""] = trial
        if trial.still_fails and candidate is not None and settings is None:
            if red.best is None or candidate.nodes <= red.best.nodes:
                red.best, red.best_path = candidate, path
        return trial

    try:
        if "confirm" not in red.replay:  # the user's own failed build of the same key is the first trial's verdict
            from trtls.triage.user_build import current_key, failed_build

            red.phase = "looking for the user's failed build of this engine key"
            key = await asyncio.to_thread(current_key, loaded, engine)
            red.user_build = await asyncio.to_thread(failed_build, loaded, engine, key)
        first = await attempt("confirm", path=onnx_path)
        if red.target is None:
            red.cause = "not_reproduced"
            if first.outcome == "built":
                red.error = "the engine builds: nothing to reduce"
            elif red.fail_regex:
                said = "--fail-regex" if red.fail_regex_from == "argument" else f"[engines.{engine}.triage] fail_regex"
                red.error = f"the build {first.outcome}, but what it said matches no {said} pattern: nothing to reduce"
            else:
                red.error = (
                    f"the build {first.outcome} without a classified failure: nothing to reduce (to reduce it anyway, "
                    "say what the failure looks like: --fail-regex PATTERN, matched against its error and log)"
                )
            return red
        first.still_fails = True
        red.verdicts["confirm"] = Verdict(outcome=first.outcome, stillFails=True)
        tried[candidate_key(Whole.of(model))] = first  # a bisection's span of every node is this model: not rebuilt
        if not compute:  # no node to cut (none, or constants only): the whole model is the smallest failing one
            await _settings_cause(red, attempt, whole=onnx_path)
            red.cause = "configuration" if red.cause_settings else "not_reduced"
            return red
        red.phase = "probing every tensor's shapes (ONNX Runtime, or ONNX shape inference where it cannot run)"
        probe = await asyncio.to_thread(probe_shapes, model, profiles)
        red.shape_probe, facts = probe.record, probe.facts
        red.phase = "cutting candidates"

        def known(unknown: Any, indices: list[int]) -> list[int]:
            """`indices` whose cut needs no tensor without facts (`unknown(i)`: the ones it needs). Only shape
            inference leaves tensors out: with ONNX Runtime's facts no index is dropped, so none is cut to check."""
            return [i for i in indices if not unknown(i)] if probe.inferred else indices

        named = named_node(graph, compute, red.target)
        if named is not None:  # the failure names its node (a parser rejection, a named layer): that node alone
            alone = cut(graph, named, named, facts, len(profiles))
            # outputs without facts are written untyped: a parser rejection of the node comes before they are read
            inputs_known = set(alone.unknown) <= set(graph.nodes[named].output)
            if inputs_known and (await attempt("named_node", alone)).still_fails:
                await _settings_cause(red, attempt)
                red.cause = "configuration" if red.cause_settings else "model"
                return red
        # outputs: the span from the first node to node i, every branch it holds kept (a failing branch that ends
        # before another output's deeper one stays in); its failure changes once along the order. A span ends only
        # at a node that makes a floating-point tensor, or a control-flow node: integer shape arithmetic (Shape,
        # Gather, Concat, Cast to int64) is no network to build on its own, and Polygraphy folds it before it bisects
        ends = known(lambda i: unknown_tensors(graph, 0, i, facts, branch=False), span_ends(graph, compute, facts))
        last = None
        if ends:
            last = await bisect_cut(
                attempt,
                lambda i: cut(graph, 0, ends[i], facts, len(profiles), branch=False),
                len(ends),
                invert=False,
                step="outputs",
            )
        last_index = ends[last] if last is not None else compute[-1]
        if last == 1:  # the bisection assumes the first span passes and never builds it: one trial says
            one = cut(graph, 0, ends[0], facts, len(profiles))
            if not one.unknown and (await attempt("first_node", one)).still_fails:
                await _settings_cause(red, attempt)
                red.cause = "configuration" if red.cause_settings else "model"
                return red
        # inputs: the first node kept, on node `last_index`'s branch (what it depends on: the other branches go);
        # when no branch cut fails the same way (the failure needs another branch of the span), on the span
        upto = [i for i in compute if i <= last_index]
        for branch in (True, False):
            starts = known(lambda i, b=branch: unknown_tensors(graph, i, last_index, facts, branch=b), upto)
            start = await search_from_end(
                attempt,
                lambda i, b=branch, s=starts: cut(graph, s[i], last_index, facts, len(profiles), branch=b),
                len(starts),
                step="inputs" if branch else "inputs_span",
                last_first=branch,  # the span pass runs when no branch cut failed: no reason to expect the last nodes
            )
            if start is not None or len(starts) < 2:
                break
        if red.best is None:  # no cut failed the same way: the whole model is the smallest failing one
            await _settings_cause(red, attempt, whole=onnx_path)
            red.cause = "configuration" if red.cause_settings else "not_reduced"
            return red
        await _settings_cause(red, attempt)
        red.cause = "configuration" if red.cause_settings else "model"
    except Stop:
        red.stopped_by = red.stopped_by or red.token.source
        if red.target is not None and red.cause is None and red.best is not None:
            # the smallest failing model found before the stop; the model is said to be the cause only where no
            # setting could be: a setting measured as one before the stop is the cause, and a stop before the
            # settings were put back leaves the cause unmeasured (None: the record says so)
            if red.cause_settings:
                red.cause = "configuration"
            elif not red.settings_changed or red.settings_not_tried:
                red.cause = "model"
    return red


async def _settings_cause(red: Reduction, attempt: Any, whole: Path | None = None) -> None:
    """Put each setting the recipe changes back to its default on the minimal model (or, with `whole`, on the
    model itself): one without which it builds is a cause."""
    path = whole or red.best_path
    if path is None:
        return
    if red.settings_changed and red.target is not None and red.target.kind == "parser_rejection":
        # the parser refuses the model before a builder exists: no builder setting can be the cause, no trial needed
        red.settings_not_tried = "the parser rejects it before any builder setting applies"
        return
    from trtls.core.build_config import BuilderSettings

    defaults = flat_settings(BuilderSettings())
    on = "whole" if whole is not None or red.best is None else candidate_key(red.best)
    for key in sorted(red.settings_changed):
        trial = await attempt("settings", path=path, settings={key: defaults.get(key)}, key=f"settings:{on}:{key}")
        trial.reverted = {key: defaults.get(key)}
        if trial.outcome == "built":
            red.cause_settings[key] = red.settings_changed[key]


def new_reduction(loaded: LoadedRecipe, engine: str, max_trials: int, fail_regex: list[str] | None = None) -> Reduction:
    """A reduction of `engine`; its failure pattern is `fail_regex` when given (the CLI's --fail-regex, the editor's
    failRegex), else the recipe's `[engines.NAME.triage] fail_regex`, else none (the classified failure)."""
    from trtls.builds.supervisor.job import new_build_id

    rid = new_build_id(f"reduce-{engine}")
    red = Reduction(rid, engine, state_dir(loaded.path) / "reduce" / rid, max_trials=max_trials)
    recipe_patterns = loaded.engine(engine).triage.patterns()
    if fail_regex:
        red.fail_regex, red.rule, red.fail_regex_from = list(fail_regex), RULE_REGEX, "argument"
    elif recipe_patterns:
        red.fail_regex, red.fail_regex_from = recipe_patterns, "recipe"
        red.rule = RULE_REGEX + f" (the patterns are the recipe's [engines.{engine}.triage] fail_regex)"
    return red
