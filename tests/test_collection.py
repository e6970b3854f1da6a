"""Every test file is collected: pytest's default `norecursedirs` once skipped all of tests/build silently."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).parent


def test_every_test_file_is_collected() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-n", "0", str(TESTS)],
        capture_output=True,
        text=True,
        cwd=TESTS.parent,
    )
    collected = {line.split("::")[0] for line in out.stdout.splitlines() if "::" in line}
    on_disk = {
        str(p.relative_to(TESTS.parent)) for p in TESTS.rglob("test_*.py") if "data" not in p.relative_to(TESTS).parts
    }
    assert on_disk - collected == set(), out.stdout[-2000:] + out.stderr[-2000:]
    assert "tests/builds/test_build_core.py" in collected
