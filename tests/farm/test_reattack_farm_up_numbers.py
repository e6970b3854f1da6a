"""`trtls farm up` with a count no farm can have — `--num-cpus -3`, `--num-cpus 0` (once silently "all CPUs"),
`--workers -1` (once silently 0) — is bad input: exit 2 naming the option, before anything is written or started.
A negative CPU count used to start the head, which died inside Ray; the user got exit 1 and "see the log"."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.parametrize(
    "args", [("--num-cpus", "-3"), ("--num-cpus", "0"), ("--workers", "-1"), ("--num-cpus", "1", "--workers", "-5")]
)
def test_a_count_no_farm_can_have_is_bad_input(tmp_path: Path, args: tuple[str, ...]) -> None:
    state = tmp_path / "farm" / "farm.json"
    env = {**os.environ, "TRTLS_FARM_STATE": str(state)}
    try:
        r = subprocess.run(
            [sys.executable, "-m", "trtls.cli.main", "farm", "up", *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
    finally:  # a farm the command wrongly started is stopped, never left running
        if state.exists():
            subprocess.run([sys.executable, "-m", "trtls.cli.main", "farm", "down"], env=env, timeout=120)
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    option = "--workers" if "--workers" in args else "--num-cpus"
    assert f"trtls farm up: {option} " in r.stderr and "must be at least" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
    assert not state.parent.exists()  # nothing written: no state folder, token or log


def test_farm_up_without_a_count_offers_the_cpus_it_may_use_not_the_machines(tmp_path: Path) -> None:
    """No `--num-cpus` and no recipe: the head offers Ray the CPUs this process may keep busy (core.cgroups) — pinned
    to one CPU, one — where it once offered `os.cpu_count()`, and Ray then ran that many cells on the one CPU."""
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("one CPU here: pinning changes nothing")
    state = tmp_path / "farm" / "farm.json"
    env = {**os.environ, "TRTLS_FARM_STATE": str(state)}
    one = {min(os.sched_getaffinity(0))}
    cli = [sys.executable, "-m", "trtls.cli.main", "farm"]
    try:
        up = subprocess.run([*cli, "up", "--workers", "0"], capture_output=True, text=True, env=env, timeout=300,
                            preexec_fn=lambda: os.sched_setaffinity(0, one))  # fmt: skip
        assert up.returncode == 0, up.stderr
        status = subprocess.run([*cli, "status", "--json"], capture_output=True, text=True, env=env, timeout=120)
    finally:
        if state.exists():
            subprocess.run([*cli, "down"], env=env, timeout=120, capture_output=True)
    import json

    assert json.loads(status.stdout)["num_cpus"] == 1, status.stdout
