"""`-o` over another project's bundle records: a recipe protects its own routes' sidecars, SBOMs and ledger by path,
but `trtls check --format json -o ../other/build/x.bundle.trtls.json` (a project not loaded here) replaced that
project's sidecar with the report — the bundle then read as one trtls did not write. Files trtls owns wherever they
lie are refused by their names now: a bundle's sidecar (`*.trtls.json`), its SBOM (`*.cdx.json`) and a promotion
ledger (`trtls.promotions.jsonl`) — TRT109, exit 2, nothing written. Real CLI processes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


def _check_to(workspace: Path, target: Path) -> subprocess.CompletedProcess[str]:
    """`trtls check WS --format json -o TARGET` in a real process."""
    argv = [sys.executable, "-m", "trtls", "check", str(workspace), "--format", "json", "-o", str(target)]
    return subprocess.run(argv, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize(
    ("name", "what"),
    [
        ("build/x.bundle.trtls.json", "a bundle's sidecar record"),
        ("build/x.bundle.cdx.json", "a bundle's SBOM"),
        ("trtls.promotions.jsonl", "a promotion ledger"),
    ],
)
def test_another_projects_bundle_records_are_never_written_over(workspace: Path, tmp_path: Path, name, what) -> None:
    target = tmp_path / "other" / name
    target.parent.mkdir(parents=True)
    target.write_text('{"theirs": true}\n')
    r = _check_to(workspace, target)
    assert r.returncode == 2 and f"TRT109 is {what} (by its name)" in r.stderr, (r.stdout, r.stderr)
    assert target.read_text() == '{"theirs": true}\n'
    # a report this command writes beside it is written, and replaced by the next one
    plain = target.with_name("report.json")
    for _ in range(2):
        ok = _check_to(workspace, plain)
        assert ok.returncode == 0 and plain.read_text().startswith("{"), ok.stderr
