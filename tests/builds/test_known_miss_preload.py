"""A known miss starts its worker with the builder module its memo's job names, before the raw recipe is parsed
(cli/store_lookup._start_worker, builds/supervisor/spawn.preload_of_job), and the parse that follows confirms it.
Where the recipe says otherwise, the guessed worker is ended (killed: it was sent nothing) and the recipe's answer
stands: a worker preloading what the recipe's engine wants, or none at all (a `[cluster]` places its own workers).

Real worker processes (`python -m trtls.builds.worker --preload …`), started as the fast path starts them; nothing is
sent to them, so nothing is built."""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from trtls.builds.supervisor import worker_launch
from trtls.cli import store_lookup

DROPPED = -signal.SIGKILL  # a worker no build took is ended at once (worker_launch.drop_unadopted), never importing


@pytest.fixture
def spawned(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[subprocess.Popen[bytes]]]:
    """Every worker `worker_launch.start_now` starts in the test (the real function, recorded); all ended afterwards."""
    workers: list[subprocess.Popen[bytes]] = []
    real = worker_launch.start_now

    def recorded(preload: str) -> subprocess.Popen[bytes]:
        workers.append(real(preload))
        return workers[-1]

    monkeypatch.setattr(worker_launch, "start_now", recorded)
    yield workers
    store_lookup.drop_started()
    for w in workers:
        worker_launch.drop_unadopted(w)
        w.wait(timeout=60)


def _preloads(workers: list[subprocess.Popen[bytes]]) -> list[str]:
    return [str(w.args[w.args.index("--preload") + 1]) for w in workers]  # type: ignore[index, union-attr]


def test_a_memo_job_the_recipe_agrees_with_starts_one_worker(workspace: Path, spawned: list) -> None:
    store_lookup._start_worker(workspace / "trtls.toml", "demo", lambda: None, {"builder_module": "auto"})
    started = store_lookup.take_started()
    assert started is not None and started[0] is spawned[0]
    assert _preloads(spawned) == ["auto"]


def test_a_guess_the_recipe_refutes_is_dropped_for_the_recipes_builder(workspace: Path, spawned: list) -> None:
    store_lookup._start_worker(workspace / "trtls.toml", "demo", lambda: None, {"builder_module": "tensorrt"})
    assert _preloads(spawned) == ["tensorrt", "auto"]  # the guess first, then what the raw recipe says
    started = store_lookup.take_started()
    assert started is not None and started[0] is spawned[1]
    assert spawned[0].wait(timeout=60) == DROPPED  # ended without building
    assert spawned[1].poll() is None  # the recipe's worker waits for its job


def test_a_guess_for_a_recipe_with_a_cluster_leaves_no_worker(workspace: Path, spawned: list) -> None:
    recipe = workspace / "trtls.toml"
    recipe.write_text(recipe.read_text() + '\n[cluster]\naddress = "local"\n')
    store_lookup._start_worker(recipe, "demo", lambda: None, {"builder_module": "auto"})
    assert store_lookup.take_started() is None  # the farm places its own workers
    assert _preloads(spawned) == ["auto"]
    assert spawned[0].wait(timeout=60) == DROPPED
