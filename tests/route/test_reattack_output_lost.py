"""`trtls route status > file` on a full disk (stdout on /dev/full: ENOSPC) ended in a traceback out of the console
stream, and a reader of the file got a cut-off answer. Now: no traceback, one line on stderr saying the output could
not all be written, and a 0 becomes exit 1 (a non-zero code stays the command's own)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from _lifecycle_sample import trtls

pytestmark = pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full (Linux)")


@pytest.fixture
def root(promoted: Path) -> Path:
    return promoted


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_status_onto_a_full_disk_is_exit_1_said_never_a_traceback(root: Path, fmt: str) -> None:
    assert trtls("route", "status", "--format", fmt, cwd=root).returncode == 0  # valid: 0 when it can be written
    with open("/dev/full", "w") as full:
        r = subprocess.run(
            [sys.executable, "-m", "trtls.cli.main", "route", "status", "--format", fmt],
            cwd=root,
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
        )
    assert "Traceback" not in r.stderr, r.stderr
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert "its output could not all be written (No space left on device)" in r.stderr, r.stderr
