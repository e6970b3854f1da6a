"""The check runs beside the builder, not its start, where CPUs are scarce (builds/supervisor/speculation.py
`let_it_start`, issue 31): once a job went ahead, a CLI with fewer CPUs than a start's runnable threads waits for the
worker's first line before it imports and checks the recipe; elsewhere it goes on at once. Real child processes and
real pipes; the whole CLI with its affinity cut to two CPUs and a real TensorRT-RTX build."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.store.helpers import build_cmd, summaries, with_store
from trtls.builds.supervisor import speculation
from trtls.builds.supervisor.speculation import START_THREADS, let_it_start

NOTE_START = "TensorRT started from the last build's job while the recipe was checked"


@contextlib.contextmanager
def _child(code: str) -> Iterator[subprocess.Popen[bytes]]:
    """A real child process standing for a worker, ended when its input closes."""
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        yield proc
    finally:
        if proc.stdin is not None:
            proc.stdin.close()
        proc.wait(60)


def test_where_cpus_are_not_scarce_the_check_goes_on_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(speculation, "_cpus", lambda: START_THREADS)
    with _child("import sys; sys.stdin.read()") as quiet:  # writes nothing until its input closes
        assert let_it_start(quiet, bound_s=600) == "not_scarce"  # no wait: a bound of 10 minutes was not used


def test_on_scarce_cpus_the_wait_ends_at_the_first_line_and_reads_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(speculation, "_cpus", lambda: START_THREADS - 1)
    with _child("import sys; print('first', flush=True); sys.stdin.read()") as talker:
        assert let_it_start(talker, bound_s=600) == "started"
        assert talker.stdout is not None and talker.stdout.readline() == b"first\n"  # still there for the supervisor


def test_on_scarce_cpus_a_worker_that_ends_silent_ends_the_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(speculation, "_cpus", lambda: 1)
    with _child("pass") as gone:
        assert let_it_start(gone, bound_s=600) == "started"


def test_on_scarce_cpus_a_silent_worker_holds_the_check_no_longer_than_the_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(speculation, "_cpus", lambda: 2)
    with _child("import sys; sys.stdin.read()") as quiet:
        assert let_it_start(quiet, bound_s=0.05) == "bound"
        assert quiet.poll() is None  # the worker is left as it was: the full path adopts it


def test_on_scarce_cpus_a_worker_with_no_pipe_to_watch_holds_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(speculation, "_cpus", lambda: 2)
    with _child("import sys; sys.stdin.read()") as closed:
        assert closed.stdout is not None
        closed.stdout.close()
        assert let_it_start(closed, bound_s=600) == "unwatched"


def test_the_bound_a_test_sets_is_taken_only_when_it_is_a_sane_number(monkeypatch: pytest.MonkeyPatch) -> None:
    for given, expected in (("45", 45.0), ("", 0.3), ("x", 0.3), ("-1", 0.3), ("0", 0.3), ("1e9", 0.3)):
        monkeypatch.setenv("TRTLS_TEST_START_BOUND_S", given)
        assert speculation._start_bound() == expected, given


STAMP = """
import os, sys, time
if os.environ.get("CHECK_STAMP") and sys.orig_argv[1:4] == ["-m", "trtls", "build"]:
    def _hook(event, args):
        if event == "import" and args[0] == "pydantic" and not os.path.exists(os.environ["CHECK_STAMP"]):
            with open(os.environ["CHECK_STAMP"], "w") as fh:
                fh.write(str(time.monotonic_ns()))
    sys.addaudithook(_hook)
"""


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs Linux's CPU affinity")
def test_a_cli_on_two_cpus_checks_its_recipe_only_after_its_worker_started_the_build(
    workspace: Path, tmp_path: Path
) -> None:
    """The second build of an unchanged recipe (a fresh store: a known miss, its job sent ahead) on two CPUs: the
    CLI imports pydantic — the recipe's check — only after the worker's first event was made, and the build is the
    usual one: built, sent ahead, published."""
    store = tmp_path / "store"
    with_store(workspace, store)
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(STAMP)
    stamp = tmp_path / "pydantic-imported"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(site), *filter(None, [os.environ.get("PYTHONPATH")])]),
        "TRTLS_TEST_START_BOUND_S": "120",  # a loaded machine's slow start still ends the wait with its line
    }
    two = sorted(os.sched_getaffinity(0))[:2]

    def build() -> subprocess.CompletedProcess[str]:
        shutil.rmtree(store, ignore_errors=True)
        return subprocess.run(
            build_cmd(workspace),
            capture_output=True,
            text=True,
            env={**env, "CHECK_STAMP": str(stamp)},
            timeout=900,
            preexec_fn=lambda: os.sched_setaffinity(0, two),
        )

    first = build()
    assert first.returncode == 0, first.stderr
    stamp.unlink()
    second = build()
    assert second.returncode == 0, second.stderr
    s = summaries(workspace)[-1]
    assert s["outcome"] == "built" and any(str(n).startswith(NOTE_START) for n in s.get("notes") or [])
    run = workspace / ".trtls" / "runs" / str(s["buildId"])
    first_event = json.loads((run / "events.jsonl").read_text().splitlines()[0])
    assert int(stamp.read_text()) > int(first_event["t_ns"]), "the recipe was checked while the worker started"
    assert len(list(store.glob("entries/*"))) == 1
