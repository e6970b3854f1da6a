"""`request_reduction` and `request_divergence`: the triage jobs (docs/triage.md) as use cases. The terminal (`trtls
reduce`, `--diverge`) and the editor (Reduce, Find Divergence) both ask here, so a request is checked once, by one
rule, and the same mistake reads the same in both faces: an engine the recipe has no table of is TRT107, a failure
pattern that does not compile or could backtrack for hours TRT102 (the rule of the recipe's own `fail_regex`), a
module the reduction needs TRT982, a request that names nothing to compare TRT104.

A request answers the run it constructed (app/triage_runs.py: `ReductionRun`, `DivergenceRun`), not started: the
face subscribes to it (its lines, its progress, its registry row), then awaits `run()`, which never raises and
returns the evidence record. The search itself is the triage package's; this module only orchestrates it."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from trtls.app.results import Refused, request_error
from trtls.app.triage_runs import DivergenceRun, ReductionRun
from trtls.core.recipe_triage import pattern_problem

if TYPE_CHECKING:
    from trtls.core.recipe import LoadedRecipe


def _bad_request(code: str, message: str) -> Refused:
    return Refused("bad_request", [request_error(code, message)])


def _engine_refused(loaded: LoadedRecipe, engines: list[str]) -> Refused | None:
    """The recipe's errors, or an engine it has no table of (TRT107); a request naming no engine (a route that
    deploys its ONNX) needs no engine table."""
    from trtls.app.request import refused_recipe

    if loaded.recipe is None or engines:
        return refused_recipe(loaded, engines)
    return None


def bad_pattern(patterns: list[str] | None) -> Refused | None:
    """A failure pattern that does not compile: TRT102, worded as the recipe's `[engines.NAME.triage] fail_regex`."""
    for pattern in patterns or []:
        why = pattern_problem(pattern)
        if why is not None:
            return _bad_request("TRT102", why)
    return None


async def request_reduction(
    loaded: LoadedRecipe,
    engine: str,
    *,
    max_trials: int,
    fail_regex: list[str] | None = None,
    resume: bool = False,
) -> ReductionRun | Refused:
    """A reduction of `engine`'s failing build, constructed (its id, folder, failure pattern and trial runner) and
    not yet run. `resume`: the engine's latest stopped reduction continued when its model and table are unchanged
    (`run.red.resume_note` says what is replayed, or why it starts over). Refused for an invalid recipe, an unknown
    engine (TRT107), a pattern that does not compile (TRT102), a missing module (TRT982: said before any trial, as the
    install to run) or a model that cannot be read to resume (TRT104)."""
    refused = _engine_refused(loaded, [engine]) or bad_pattern(fail_regex)
    if refused is not None:
        return refused
    from trtls.triage.reduce_build import MISSING_MODULE, missing_module_text, missing_modules

    missing = missing_modules()
    if missing:
        return _bad_request(MISSING_MODULE, "; ".join(missing_module_text(m) for m in missing))
    from trtls.triage.reduce_build import new_reduction
    from trtls.triage.trials import TrialRunner

    red = new_reduction(loaded, engine, max_trials, fail_regex)
    if resume:
        from trtls.triage.resume import prepare_resume

        try:
            red.resume_note = await prepare_resume(loaded, engine, red)
        except OSError as exc:
            return _bad_request("TRT104", f"cannot read the model to resume: {exc}")
    return ReductionRun(red, loaded, TrialRunner(loaded, engine, red.folder, red.id))


async def request_divergence(
    loaded: LoadedRecipe,
    *,
    engine: str | None = None,
    route: str | None = None,
    candidate: Path | None = None,
    reference: Path | None = None,
    fix: bool = False,
    tensorrt: bool = False,
    inputs: Path | None = None,
    rtol: float | None = None,
    spelled: Mapping[str, str] | None = None,
) -> DivergenceRun | Refused:
    """A divergence search, constructed and not yet run: the first tensor where `engine`'s (or `route`'s) converted
    model leaves tolerance (`fix`: exclude it and compare again; `tensorrt`: the engine's layers too), or, with
    `candidate`, where two given models part ways (`reference`, default the engine's ONNX). `spelled`: how the face
    names the request's fields in what it says (the terminal's `--candidate`); the code is the same either way.
    Refused for an invalid recipe, an unknown engine or route (TRT107), or nothing to compare (TRT104)."""

    def n(name: str) -> str:
        return (spelled or {}).get(name, name)

    if reference is not None and candidate is None:
        return _bad_request("TRT104", f"{n('reference')} needs {n('candidate')}: the model compared with it")
    if rtol is not None and not (math.isfinite(rtol) and rtol >= 0):  # nan or < 0: every tensor "diverges", even
        return _bad_request(  # a model against itself (range error 0 > -1, exit 0); inf: nothing ever would
            "TRT104", f"{n('rtol')} must be a finite number of 0 or more (a range-relative tolerance), not {rtol!r}"
        )
    if candidate is not None and (fix or route is not None or tensorrt):
        return _bad_request(
            "TRT104",
            f"{n('candidate')} compares two given models: {n('fix')}, {n('route')} and {n('tensorrt')} need a "
            "conversion the recipe makes",
        )
    if candidate is None and (engine is None) == (route is None):
        return _bad_request("TRT107", f"give one of {n('engine')} or {n('route')}")
    refused = _engine_refused(loaded, [engine] if engine is not None else [])
    if refused is not None:
        return refused
    from trtls.builds.supervisor.job import new_build_id, state_dir
    from trtls.core.cancel import CancelToken

    if candidate is not None:
        if engine is None and reference is None:
            return _bad_request(
                "TRT104", f"{n('candidate')} needs {n('reference')} or {n('engine')} (whose ONNX is the reference)"
            )
        if reference is None:
            assert engine is not None
            reference = loaded.resolve(loaded.engine(engine).onnx)
        rid = new_build_id(f"diverge-{engine or reference.stem}")
        run = DivergenceRun(rid, engine, None, state_dir(loaded.path) / "reduce" / rid, CancelToken(), loaded)
        run.pair, run.inputs, run.rtol = (reference, candidate), inputs, rtol
        run.step = f"comparing {candidate.name} with {reference.name}"
        return run
    from trtls.triage.diverge_run import DivergenceUnavailable, setup_divergence

    try:
        setup = setup_divergence(loaded, engine=engine, route=route, inputs=inputs, rtol=rtol)
    except DivergenceUnavailable as exc:
        return _bad_request("TRT104", str(exc))
    except KeyError as exc:  # a route the recipe has no table of
        return _bad_request("TRT107", str(exc).strip("'\""))
    rid = new_build_id(f"diverge-{setup.engine or setup.route}")
    run = DivergenceRun(rid, setup.engine, route, state_dir(loaded.path) / "reduce" / rid, CancelToken(), loaded)
    run.setup, run.fix, run.tensorrt = setup, fix, tensorrt
    return run
