"""A reader that goes away is no reason for a traceback (issue 27's "no traceback", tried as a careless user would:
`trtls schema | head -c 10`, `trtls build … | head -1`). The first write after the pipe's reader ended raised
BrokenPipeError through every print: a traceback, exit 1, and for a build after its engine was built. Now the
command's stdout goes nowhere from then on, the command finishes (the build writes its evidence) and exits with its
own code. Real processes whose stdout is a real pipe whose read end is closed before they write a byte."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


def run_into_a_closed_pipe(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    read_end, write_end = os.pipe()
    os.close(read_end)  # nobody will ever read: every write of the child is EPIPE
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "trtls", *args], stdout=write_end, stderr=subprocess.PIPE, text=True, cwd=cwd
        )
    finally:
        os.close(write_end)
    _, err = proc.communicate(timeout=600)
    return subprocess.CompletedProcess(proc.args, proc.returncode, "", err)


def test_schema_into_a_closed_pipe_ends_quietly(tmp_path: Path) -> None:
    done = run_into_a_closed_pipe("schema", cwd=tmp_path)
    assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr, done.stderr
    assert done.returncode == 0, done.stderr


def test_a_build_into_a_closed_pipe_finishes_and_keeps_its_exit_code(workspace: Path) -> None:
    done = run_into_a_closed_pipe("build", str(workspace), "--engine", "demo", cwd=workspace)
    assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr, done.stderr
    assert done.returncode == 0, done.stderr
    (summary,) = (workspace / ".trtls" / "runs").glob("*/summary.json")
    assert json.loads(summary.read_text())["outcome"] == "built"
    assert (workspace / "build" / "demo.engine").is_file()
