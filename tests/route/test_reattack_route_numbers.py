"""A route table's numbers that judge nothing were accepted (`trtls check` exit 0): an infinite threshold or
tolerance (`latency_p50_ms = inf`, `atol = inf`, `memory_mib = 1e999` — TOML reads it as inf) passes every
measurement, and canary stages documented as "each > 0 and ≤ 100" took nan, -1, inf and 500. Each is now a located
TRT102 error, exit 2."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SAMPLE = Path(__file__).resolve().parents[2] / "samples" / "route" / "trtls.toml"


def route_recipe(tmp_path: Path, old: str, new: str) -> Path:
    shutil.copyfile(SAMPLE, tmp_path / "trtls.toml")
    text = (tmp_path / "trtls.toml").read_text()
    start = text.index("[routes.tiny_ort]")
    assert old in text[start:], old
    (tmp_path / "trtls.toml").write_text(text[:start] + text[start:].replace(old, new, 1))
    return tmp_path


def check(folder: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "trtls.cli.main", "check", str(folder)], capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize(
    ("old", "new", "said"),
    [
        ("latency_p50_ms = 5.0", "latency_p50_ms = inf", "'latency_p50_ms' must be a finite number, not inf"),
        ("memory_mib = 1024", "memory_mib = 1e999", "'memory_mib' must be a finite number, not inf"),
        ("atol = 1e-4", "atol = inf", "'atol' must be a finite number, not inf"),
        ("stages = [1, 10, 100]", "stages = [1, 10, nan]", "'stages[2]' must be a finite number, not nan"),
        ("stages = [1, 10, 100]", "stages = [-1, 10, 100]", "Input should be greater than 0"),
        ("stages = [1, 10, 100]", "stages = [1, 10, 500]", "Input should be less than or equal to 100"),
    ],
)
def test_a_number_that_judges_nothing_is_a_located_error(tmp_path: Path, old: str, new: str, said: str) -> None:
    folder = route_recipe(tmp_path, old, new)
    r = check(folder)
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    out = r.stdout + r.stderr
    line = next((x for x in out.splitlines() if said in x), None)
    assert line is not None, out
    assert line.startswith(f"{folder / 'trtls.toml'}:") and "TRT102" in line, line  # located: file:line:col


def test_the_sample_numbers_still_check(tmp_path: Path) -> None:
    folder = route_recipe(tmp_path, "stages = [1, 10, 100]", "stages = [1, 10, 100]")
    r = check(folder)
    assert "TRT102" not in r.stdout + r.stderr, r.stdout + r.stderr
