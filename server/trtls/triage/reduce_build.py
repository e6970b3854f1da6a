"""`trtls reduce`: a failing build reduced to the smallest model that still fails the same way.

The search is Polygraphy's `debug reduce` (its own `BisectMarker` and `LinearMarker`): bisect the last node kept
(the candidate is that node and what it depends on), then the first node kept, then a linear pass over what is left;
every step a real worker build of the candidate (`trials`), judged by `signature.same_failure`. Before reducing, the
model's first node alone is built: when it fails the same way, the settings are the cause, not the model. After
reducing, each setting the recipe changes from its default is put back on the minimal model, one at a time: a
setting without which the minimal model builds is named as the cause.

A stop (any cancel source, `--timeout`, `--max-trials`) ends the current trial cooperatively and keeps the smallest
failing model found so far. Everything is written atomically under `.trtls/reduce/<id>/` (`evidence`).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trtls.builds.build import state_dir
from trtls.builds.roots import state_root
from trtls.core.build_config import flat_settings
from trtls.core.cancel import CancelToken
from trtls.core.recipe import LoadedRecipe
from trtls.fs import Kind, atomic_write_bytes, ensure_folder
from trtls.triage.signature import RULE, failure_signature, same_failure
from trtls.triage.trials import Trial, TrialRunner


class Stop(Exception):
    """The reduction was asked to stop (cancel, timeout, trial budget)."""


@dataclass
class Reduction:
    id: str
    engine: str
    folder: Path
    max_trials: int = 40
    token: CancelToken = field(default_factory=CancelToken)
    trials: list[Trial] = field(default_factory=list)
    original_nodes: int = 0
    target: dict[str, Any] | None = None
    best: Any = None  # the smallest Candidate that still fails
    best_path: Path | None = None
    cause: str | None = None  # model | configuration | not_reproduced
    cause_settings: dict[str, Any] = field(default_factory=dict)
    stopped_by: str | None = None  # cancel source, or "max_trials"
    stopped_during_trial: int | None = None  # the trial whose build was running when the stop came (it is cancelled)
    trials_at_stop: int | None = None  # trials started when the stop came: no trial starts after it
    error: str | None = None
    rule: str = RULE

    @property
    def trial_dir(self) -> Path:
        return self.folder / "trials"


def _compute_indices(graph: Any) -> list[int]:
    """The nodes a marker walks: every node but `Constant` (constants come along with what reads them)."""
    return [i for i, n in enumerate(graph.nodes) if n.op != "Constant"]


async def run_reduction(loaded: LoadedRecipe, engine: str, red: Reduction, runner: TrialRunner) -> Reduction:
    import onnx
    import onnx_graphsurgeon as gs

    from trtls.triage.probe import probe_tensors
    from trtls.triage.subgraph import cut

    eng = loaded.engine(engine)
    onnx_path = loaded.resolve(eng.onnx)
    model = onnx.load(str(onnx_path))  # external data from the model's own folder, as the parser reads it
    graph = gs.import_onnx(model)
    graph.toposort()
    compute = _compute_indices(graph)
    red.original_nodes = len(graph.nodes)
    root = state_root(red.trial_dir)  # the recipe's folder: `.trtls/reduce/<id>/trials` stays inside it
    ensure_folder(red.trial_dir, within=root)
    profiles = eng.job_profiles()
    tried: dict[tuple[str, ...], Trial] = {}

    def on_stop(source: str) -> None:  # on the loop: a trial is either running (its build cancelled) or not started
        red.trials_at_stop = len(red.trials)
        if runner.current is not None and red.trials:
            red.stopped_during_trial = red.trials[-1].index
            runner.current.cancel(source)

    red.token.on_request(on_stop)

    async def attempt(step: str, candidate: Any = None, *, path: Path | None = None, settings: Any = None) -> Trial:
        if red.token.is_set:
            raise Stop
        if len(red.trials) >= red.max_trials:
            red.stopped_by = "max_trials"
            raise Stop
        if candidate is not None and settings is None:
            key = tuple(candidate.node_names)
            if key in tried:  # the same cut again (a marker can land on one): its verdict, not another build
                return tried[key]
        index = len(red.trials)
        trial = Trial(
            index,
            step,
            candidate.nodes if candidate else red.original_nodes,
            candidate.first if candidate else 0,
            candidate.last if candidate else len(graph.nodes) - 1,
            f"{red.id}.t{index:03d}",
        )
        red.trials.append(trial)
        if candidate is not None:
            path = red.trial_dir / f"{index:03d}.onnx"
            atomic_write_bytes(path, candidate.model.SerializeToString(), kind=Kind.evidence, within=root)
        assert path is not None
        if settings is not None:  # a settings trial rebuilds the minimal model: its nodes and profiles
            trial.nodes, trial.first, trial.last = red.best.nodes, red.best.first, red.best.last
        profiles_of = candidate or (red.best if settings is not None else None)
        summary = await runner.build(trial, path, profiles_of.profiles if profiles_of else None, settings)
        if red.token.is_set and trial.outcome == "cancelled":
            raise Stop
        trial.still_fails = red.target is not None and same_failure(red.target, summary)
        if red.target is None:
            red.target = failure_signature(summary)
        if candidate is not None and settings is None:
            tried[tuple(candidate.node_names)] = trial
        if trial.still_fails and candidate is not None and (red.best is None or candidate.nodes <= red.best.nodes):
            red.best, red.best_path = candidate, path
        return trial

    try:
        first = await attempt("confirm", path=onnx_path)
        if red.target is None:
            red.cause = "not_reproduced"
            red.error = (
                f"the build {first.outcome} without a classified failure: nothing to reduce"
                if first.outcome != "built"
                else "the engine builds: nothing to reduce"
            )
            return red
        first.still_fails = True
        facts = await asyncio.to_thread(probe_tensors, model, profiles)
        one = cut(graph, compute[0], compute[0], facts, len(profiles))
        if (await attempt("one_node", one)).still_fails:
            red.cause = "configuration"
            return red
        last = await _bisect(
            red,
            attempt,
            lambda i: cut(graph, 0, compute[i], facts, len(profiles)),
            len(compute),
            invert=False,
            step="outputs",
        )
        last_index = compute[last] if last is not None else compute[-1]
        upto = [i for i in compute if i <= last_index]
        start = await _bisect(
            red,
            attempt,
            lambda i: cut(graph, upto[i], last_index, facts, len(profiles)),
            len(upto),
            invert=True,
            step="inputs",
        )
        first_index = upto[start] if start is not None else 0
        span = [i for i in compute if first_index <= i <= last_index]
        if len(span) > 1:
            end = await _linear(
                red,
                attempt,
                lambda i: cut(graph, first_index, span[i], facts, len(profiles)),
                len(span),
                invert=False,
                step="linear_outputs",
            )
            last_index = span[end] if end is not None else last_index
            span = [i for i in span if i <= last_index]
            begin = await _linear(
                red,
                attempt,
                lambda i: cut(graph, span[i], last_index, facts, len(profiles)),
                len(span),
                invert=True,
                step="linear_inputs",
            )
            first_index = span[begin] if begin is not None else first_index
        await _settings_cause(red, attempt, eng)
        red.cause = red.cause or "model"
    except Stop:
        red.stopped_by = red.stopped_by or red.token.source
        if red.target is not None and red.cause is None and red.best is not None:
            red.cause = "model"  # the smallest failing model found before the stop
    return red


async def _bisect(red: Reduction, attempt: Any, make: Any, count: int, *, invert: bool, step: str) -> int | None:
    from polygraphy.tools.debug.subtool.reduce import BisectMarker

    marker = BisectMarker(count, invert=invert)
    while not marker.stop():
        candidate = make(marker.node_index)
        trial = await attempt(step, candidate)
        marker.step(not trial.still_fails, candidate.compute_nodes)
    marker.finish()
    return marker.best_bad_node_index


LINEAR_GIVE_UP = 3  # the linear pass ends after this many candidates in a row that do not reproduce


async def _linear(red: Reduction, attempt: Any, make: Any, count: int, *, invert: bool, step: str) -> int | None:
    """Polygraphy's linear pass over what the bisections left, one node further each trial; it gives up after
    LINEAR_GIVE_UP misses in a row (past the failing node, smaller candidates only lose it)."""
    from polygraphy.tools.debug.subtool.reduce import LinearMarker

    marker = LinearMarker(count, invert=invert)
    marker.step(False, count)  # the whole span is the bisections' result: known to fail, not built again
    best, misses = None, 0
    while not marker.stop() and misses < LINEAR_GIVE_UP:
        candidate = make(marker.node_index)
        trial = await attempt(step, candidate)
        if trial.still_fails:
            best, misses = marker.node_index, 0
        else:
            misses += 1
        marker.step(not trial.still_fails, candidate.compute_nodes)
    return best


async def _settings_cause(red: Reduction, attempt: Any, eng: Any) -> None:
    """Put each changed setting back to its default on the minimal model: one without which it builds is a cause."""
    if red.best is None or red.best_path is None:
        return
    from trtls.core.build_config import BuilderSettings

    defaults, ours = flat_settings(BuilderSettings()), flat_settings(eng.builder)
    changed = {k: v for k, v in ours.items() if defaults.get(k) != v}
    for key in sorted(changed):
        trial = await attempt("settings", path=red.best_path, settings={key: defaults.get(key)})
        trial.reverted = {key: defaults.get(key)}
        if trial.outcome == "built":
            red.cause_settings[key] = changed[key]
    if red.cause_settings:
        red.cause = "configuration"


def new_reduction(loaded: LoadedRecipe, engine: str, max_trials: int) -> Reduction:
    from trtls.builds.build import new_build_id

    rid = new_build_id(f"reduce-{engine}")
    return Reduction(rid, engine, state_dir(loaded.path) / "reduce" / rid, max_trials=max_trials)
