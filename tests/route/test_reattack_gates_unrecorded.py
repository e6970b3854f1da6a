"""`trtls gates` whose evidence cannot be written (a FIFO planted at `.trtls/routes/<route>/summary.json`; the same
for a full disk or a read-only `.trtls`) printed "route …: supported" and exited 0: the TRT412 error ("the
decision stands unrecorded") reached only the editor, and `trtls route promote` then read the previous run's record.
Now the error is said on stderr, located at the recipe, and a supported run exits 1."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from _lifecycle_sample import ROUTE, copy, trtls


@pytest.fixture
def root(prepared, tmp_path) -> Path:
    return copy(prepared, tmp_path / "route")


def test_a_supported_run_whose_evidence_cannot_be_written_is_said_and_not_exit_0(root: Path) -> None:
    summary = root / ".trtls" / "routes" / ROUTE / "summary.json"
    summary.unlink()
    os.mkfifo(summary)
    r = trtls("gates", "--route", ROUTE, cwd=root)
    assert "Traceback" not in r.stderr, r.stderr
    assert r.returncode == 1, (r.returncode, r.stdout[-2000:], r.stderr[-2000:])
    line = next((x for x in r.stderr.splitlines() if "TRT412" in x), "")
    assert line.startswith(f"{root / 'trtls.toml'}:1:1: TRT412 error: the gates' evidence cannot be written"), r.stderr
    assert "unrecorded" in line and "summary.json" in line
    assert summary.is_fifo()  # never written through, never replaced


def test_a_supported_run_whose_evidence_is_written_still_exits_0(root: Path) -> None:
    r = trtls("gates", "--route", ROUTE, cwd=root)
    assert r.returncode == 0 and "TRT412" not in r.stderr, (r.stdout[-2000:], r.stderr[-2000:])
