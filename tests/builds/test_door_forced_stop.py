"""Two quick Ctrl-C (issue 27, item 21): the user forced the stop, so the build is `cancelled` by ctrl_c (exit 130),
its evidence says the user forced it, and nothing blames the builder for ignoring a cancel.

Before: the second Ctrl-C ran the same escalation as a builder silent past its grace, and the build was recorded as
"forced: the builder ignored the cancel from ctrl_c for 10 s" with retry advice `retry_cold` ("its state is not
trusted"), exit 137.

A real `trtls build` of the quickstart's `demo` with the real TensorRT-RTX worker and two real SIGINTs. The worker is
held at its `before_build` test pause and stopped (SIGSTOP) there, as a builder inside one long C++ call is: the
cooperative cancel cannot finish before the second Ctrl-C, so the forced stop is what is measured, without a race.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from trtls.builds.supervisor.orphans import process_alive
from trtls.core.evidence import record_problems

from .cli_procs import pause_env, wait_for_bound, wait_for_file
from .helpers import leftovers


def test_two_quick_ctrl_c_are_the_users_forced_stop_not_the_builders_fault(workspace: Path, tmp_path: Path) -> None:
    pause = tmp_path / "pause"
    cli = subprocess.Popen(
        [sys.executable, "-m", "trtls", "build", str(workspace), "--engine", "demo"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **pause_env(pause, "before_build")},
    )
    try:
        marker = wait_for_file(pause, ".before_build")
        build_id, worker = marker.name.removesuffix(".before_build"), int(marker.read_text())
        wait_for_bound(workspace, "demo", build_id)  # a job may reach the worker before its build is the supervisor's
        os.kill(worker, signal.SIGSTOP)  # inside the builder: no callback will see the cancel for a while
        cli.send_signal(signal.SIGINT)  # 1: the cooperative cancel
        assert cli.stderr is not None
        seen = []
        for line in cli.stderr:  # the first press was handled: the CLI says how to force
            seen.append(line)
            if "Ctrl-C again to force" in line:
                break
        cli.send_signal(signal.SIGINT)  # 2: force
        out, err = cli.communicate(timeout=120)
        err = "".join(seen) + err
    finally:
        if cli.poll() is None:
            cli.kill()
            cli.wait()
    assert cli.returncode == 130, (out + err)[-3000:]  # cancelled by Ctrl-C, not 137 (forced: the builder's fault)
    assert not process_alive(worker), "the forced stop left the worker running"
    s = json.loads((workspace / ".trtls" / "runs" / build_id / "summary.json").read_text())
    assert s["outcome"] == "cancelled" and s["cancelSource"] == "ctrl_c" and s["forced"] is True
    assert record_problems(s) == []
    assert any("the user forced the stop" in n for n in s["notes"]), s["notes"]
    blame = ("ignored", "did not return within", "not trusted")
    assert not any(word in text for word in blame for text in [s["retryRule"], *s["notes"], out, err]), (
        s["retryRule"],
        s["notes"],
        out[-2000:],
    )
    assert s["cleanupStatus"] == "cleaned" and s["cancelLatencyMs"] is not None
    assert not (workspace / "build" / "demo.engine").exists() and leftovers(workspace) == []
    assert not (workspace / ".trtls" / "runs" / build_id / "running.json").exists()
