"""benchmarks/bench_time_left_farm.py: which cells it judges, against which history, from which first event.

The grouping is checked on a real recorded `large` build (tests/data); the whole bench on a real local Ray farm (two
`demo` cells, two runs), then judged again from the streams it kept.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
from bench_time_left_farm import config_of, judge_runs, kept_runs  # noqa: E402
from tests.farm.conftest import require_ray  # noqa: E402

TRACE = ROOT / "tests" / "data" / "trt-rtx-traces" / "large_events.jsonl"  # a real `large` build's --json stream


def keep(folder: Path, run: int, cell: str, lines: list[str]) -> None:
    (folder / f"run-{run}").mkdir(parents=True, exist_ok=True)
    (folder / f"run-{run}" / f"cell-{cell}.jsonl").write_text("\n".join(lines) + "\n")


def test_a_cell_is_judged_against_its_own_configs_earlier_runs_only(tmp_path: Path) -> None:
    lines = TRACE.read_text().splitlines()
    other = [
        json.dumps({**json.loads(line), "build_config_hash": "f" * 64}) if '"build_started"' in line else line
        for line in lines
    ]  # the same events under another config: no earlier run built it
    keep(tmp_path, 0, "a", lines)
    keep(tmp_path, 1, "a", lines)
    keep(tmp_path, 1, "b", other)
    runs = kept_runs(tmp_path)
    assert config_of(runs[1]["b"]) != config_of(runs[1]["a"])
    rows = judge_runs(runs)
    assert [(r["run"], r["cell"], r["share"], r["historyBuilds"]) for r in rows] == [
        (1, "a", 0.25, 1),
        (1, "a", 0.5, 1),
        (1, "a", 0.75, 1),
    ]
    # its history is the very same build: the clock alone is the truth, and the estimate is judged against it
    for r in rows:
        assert r["clockS"] == pytest.approx(r["truthS"], abs=0.002)
        assert r["estimateS"] is not None and r["low"] <= r["truthS"] <= r["high"]


@pytest.mark.slow  # two real matrices on a real Ray instance: ~45 s on 2 cores
def test_the_bench_on_a_real_local_farm_keeps_every_cells_stream_and_judges_the_later_run(tmp_path: Path) -> None:
    require_ray()
    streams, out = tmp_path / "streams", tmp_path / "out.json"
    bench = [sys.executable, str(ROOT / "benchmarks" / "bench_time_left_farm.py")]
    run = subprocess.run(
        bench + ["--cells", "2", "--model", "demo", "--runs", "2", "--keep", str(streams), "--json", str(out)],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    for r in (0, 1):  # each cell's events.jsonl from its evidence: the driver's `queued` first, build_finished last
        kept = sorted(p.name for p in (streams / f"run-{r}").iterdir())
        assert kept == ["cell-1.jsonl", "cell-2.jsonl"]
        for name in kept:
            types = [json.loads(line)["type"] for line in (streams / f"run-{r}" / name).read_text().splitlines()]
            assert types[0] == "queued" and types[-1] == "build_finished" and "environment" in types
    result = json.loads(out.read_text())
    assert {(r["run"], r["cell"], r["historyBuilds"]) for r in result["rows"]} == {(1, "1", 1), (1, "2", 1)}
    assert len(result["rows"]) == len(result["workerRows"]) == 6
    for cell, worker in zip(result["rows"], result["workerRows"], strict=True):
        assert (cell["cell"], cell["share"]) == (worker["cell"], worker["share"])
        assert worker["lengthS"] < cell["lengthS"]  # from `environment`, after the queue and the placement
    assert result["historyVsSpanMaxS"] is not None
    again = subprocess.run(bench + ["--replay", str(streams), "--json", str(tmp_path / "again.json")], text=True,
                           capture_output=True)  # fmt: skip
    assert again.returncode == 0, again.stderr[-2000:]
    assert json.loads((tmp_path / "again.json").read_text())["summary"] == result["summary"]
