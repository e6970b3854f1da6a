"""Issue 30's "no more trials than Polygraphy's bisect, on every one": the inputs search tries the last node alone and
the last two before it bisects (the benchmark's magika spent 12 trials against Polygraphy's 11: its bisections 6 + 5
and the settings trial that names the cause), and a parser rejection spends no settings trial (the parser runs
before any builder setting applies). Real TensorRT-RTX reductions in the real CLI process, on the real magika model
and on models made here; the search's own bound counted over every size and answer."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

from .reduce_models import layernorm_last
from .test_reduce_cases import SMEM, _chain, _engine, _reduce

# polygraphy debug reduce --mode bisect on the benchmark's cases (32 KiB of tactic shared memory): its checks and the
# nodes of the model it ends on (not Constant), measured by benchmarks/bench_reduce_vs_polygraphy.py
# (benchmarks/results/reduce-vs-polygraphy-search-from-end-2026-12-03.txt; docs/performance.md)
POLYGRAPHY_MAGIKA_CHECKS = 11
POLYGRAPHY_TWO_OUTPUTS_CHECKS = 10  # the two-output model, its LayerNorm branch ending first (depth 40: 42 nodes)
POLYGRAPHY_TWO_OUTPUTS_NODES = 41
TWO_OUTPUTS_DEPTH = 40  # the benchmark's


def _user_build(ws: Path, engine: str) -> None:
    """`trtls build` as the user runs it before `trtls reduce` (it fails): its record is the reduction's first trial."""
    proc = subprocess.run(
        [sys.executable, "-m", "trtls", "build", str(ws), "--engine", engine, "--json"], capture_output=True, text=True
    )
    assert proc.returncode == 1, proc.stderr[-2000:]


def _steps(record: dict) -> list[str]:
    return [t["step"] for t in record["trials"]]


def test_magika_is_reduced_in_no_more_trials_than_polygraphy_and_its_setting_named(tmp_path: Path) -> None:
    """The real magika model with 32 KiB of tactic shared memory (a Myelin CHECK): the inputs search ends at the
    last two nodes in 2 trials (the bisection spent 5), so with the settings trial that names the cause the
    reduction stays within Polygraphy's 11 checks, to a smaller model (2 nodes; Polygraphy's: 3)."""
    from tests.onnx_files.third_party import fetch_all

    shutil.copyfile(fetch_all()["magika"], tmp_path / "m.onnx")
    (tmp_path / "trtls.toml").write_text(
        '[engines.m]\nonnx = "m.onnx"\noutput = "build/m.engine"\n'
        + SMEM.format(name="m")
        + "[[engines.m.profiles]]\ninputs.bytes = { min = [1, 2048], opt = [1, 2048], max = [8, 2048] }\n"
    )
    _user_build(tmp_path, "m")
    code, record, stderr = _reduce(tmp_path, "m")
    assert record is not None, stderr[-2000:]
    assert code == 0 and record["outcome"] == "configuration", record["causeText"]
    assert record["causeSettings"] == {"tactic_shared_memory_kib": 32} and record["reusedBuild"]
    assert [name.rsplit("/", 1)[-1] for name in record["minimal"]["nodeNames"]] == ["Square", "Sum_1"]
    steps = _steps(record)
    assert steps.count("inputs") == 2 and steps.count("settings") == 1, steps
    assert record["trialsBuilt"] <= POLYGRAPHY_MAGIKA_CHECKS, record["trialsByStep"]
    assert _with_the_user_build(record) <= POLYGRAPHY_MAGIKA_CHECKS, record["trialsByStep"]


def test_the_two_output_model_is_reduced_in_no_more_trials_than_polygraphy(tmp_path: Path) -> None:
    """The benchmark's two-output model (42 nodes; the failing LayerNorm branch ends before the other output's) with
    32 KiB of tactic shared memory: trtls ends on the LayerNorm alone (Polygraphy: 41 nodes) and names the setting,
    within Polygraphy's 10 checks — the user's failed build it reuses counted too (docs/performance.md: without it
    every trtls count is one more)."""
    from .test_reduce_cases import _two_outputs

    _two_outputs(tmp_path / "m.onnx", depth=TWO_OUTPUTS_DEPTH)
    (tmp_path / "trtls.toml").write_text(_engine("m", "m.onnx", "[N, 16, 64]", smem=True))
    _user_build(tmp_path, "m")
    code, record, stderr = _reduce(tmp_path, "m")
    assert record is not None, stderr[-2000:]
    assert code == 0 and record["outcome"] == "configuration", record["causeText"]
    assert record["minimal"]["nodeNames"] == ["ln"] and record["minimal"]["nodes"] <= POLYGRAPHY_TWO_OUTPUTS_NODES
    assert record["causeSettings"] == {"tactic_shared_memory_kib": 32} and record["reusedBuild"]
    assert record["trialsBuilt"] <= POLYGRAPHY_TWO_OUTPUTS_CHECKS, record["trialsByStep"]
    assert _with_the_user_build(record) <= POLYGRAPHY_TWO_OUTPUTS_CHECKS, record["trialsByStep"]


def _with_the_user_build(record: dict) -> int:
    """The builds a reduction costs when there is no failed build of the same engine key to reuse: one more."""
    return int(record["trialsBuilt"]) + (1 if record["reusedBuild"] else 0)


def test_a_failing_last_node_is_found_by_one_inputs_trial(tmp_path: Path) -> None:
    """31 nodes, the failing LayerNormalization last: the outputs bisection ends on it and the inputs search's first
    trial, the node alone, fails the same way — 1 inputs trial where the bisection spends ⌈log2 31⌉ = 5."""
    layernorm_last(tmp_path / "m.onnx", depth=30)
    (tmp_path / "trtls.toml").write_text(_engine("m", "m.onnx", "[N, 16, 64]", smem=True))
    _user_build(tmp_path, "m")
    code, record, stderr = _reduce(tmp_path, "m")
    assert record is not None, stderr[-2000:]
    assert code == 0 and record["minimal"]["nodeNames"] == ["ln"]
    assert record["causeSettings"] == {"tactic_shared_memory_kib": 32}
    steps = _steps(record)
    assert steps.count("inputs") == 1 and steps.count("settings") == 1, steps
    inputs = next(t for t in record["trials"] if t["step"] == "inputs")
    assert inputs["nodes"] == 1 and inputs["stillFails"]


def test_a_parser_rejection_spends_no_settings_trial(tmp_path: Path) -> None:
    """The parser refuses Det before any builder exists: with a recipe that changes a builder setting, the cause is
    the model, said with why no setting was put back, and the reduction is the named node's one trial."""
    ops = [("Relu", "relu"), ("Sigmoid", "sig"), ("Det", "det"), ("Neg", "neg"), ("Abs", "abs")]
    _chain(tmp_path / "m.onnx", ops, ["N", 4, 4], ["N"])
    (tmp_path / "trtls.toml").write_text(_engine("m", "m.onnx", "[N, 4, 4]", smem=True))
    _user_build(tmp_path, "m")
    code, record, stderr = _reduce(tmp_path, "m")
    assert record is not None, stderr[-2000:]
    assert record["failure"]["kind"] == "parser_rejection"
    assert code == 0 and record["outcome"] == "reduced" and record["minimal"]["nodeNames"] == ["det"]
    assert record["cause"] == "model" and record["causeSettings"] == {}
    assert "parser rejects it before any builder setting applies" in record["causeText"]
    assert record["settingsNotTried"] and "settings" not in _steps(record), _steps(record)
    assert record["trialsBuilt"] == 1, record["trialsByStep"]


def _bisection_trials(count: int, answer: int) -> int:
    """Polygraphy's BisectMarker(invert=True) over `count` starts whose cuts fail up to `answer`: its trials."""
    from polygraphy.tools.debug.subtool.reduce import BisectMarker

    marker, trials = BisectMarker(count, invert=True), 0
    while not marker.stop():
        trials += 1
        marker.step(marker.node_index > answer, count - marker.node_index)
    return trials


def test_the_search_from_the_end_finds_the_bisections_answer_within_three_trials_more() -> None:
    """Every count of starts below 500, every answer (the largest start whose cut fails; 0: only the whole span):
    the same answer as the bisection, 1 trial when it is the last node, 2 when the last two, and never more than
    3 trials beyond the bisection's."""
    from trtls.triage.cut_search import search_from_end

    async def search(count: int, answer: int, last_first: bool) -> tuple[int | None, int]:
        made: list[int] = []

        async def attempt(step: str, start: int) -> SimpleNamespace:
            made.append(start)
            return SimpleNamespace(still_fails=start <= answer)

        found = await search_from_end(attempt, lambda i: i, count, step="inputs", last_first=last_first)
        assert len(set(made)) == len(made), made  # no start tried twice
        return found, len(made)

    async def every() -> None:
        for count in range(2, 500):
            for answer in range(count):
                bisection = _bisection_trials(count, answer)
                for last_first in (True, False):
                    found, trials = await search(count, answer, last_first)
                    assert found == (answer or None), (count, answer, found)
                    assert trials <= bisection + (3 if last_first else 0), (count, answer, trials, bisection)
                    if last_first and 0 < answer >= count - 2:
                        assert trials == count - answer, (count, answer, trials)

    asyncio.run(every())


def test_a_parser_rejection_that_cannot_be_reduced_still_says_why_no_setting_was_put_back(tmp_path: Path) -> None:
    """A model that is the refused node alone cannot be made smaller: the run ends `not_reduced`, and its cause still
    says why the setting the recipe changes was not tried (the parser runs before any builder setting applies), as
    the reduced case says it — not silence that reads as "the settings were cleared"."""
    _chain(tmp_path / "m.onnx", [("Det", "det")], ["N", 4, 4], ["N"])
    (tmp_path / "trtls.toml").write_text(_engine("m", "m.onnx", "[N, 4, 4]", smem=True))
    _user_build(tmp_path, "m")
    code, record, stderr = _reduce(tmp_path, "m")
    assert record is not None, stderr[-2000:]
    assert record["failure"]["kind"] == "parser_rejection"
    assert record["outcome"] == "not_reduced" and code == 1, (code, record["outcome"], record["causeText"])
    assert record["settingsNotTried"] and "settings" not in _steps(record), _steps(record)
    assert "parser rejects it before any builder setting applies" in record["causeText"], record["causeText"]
