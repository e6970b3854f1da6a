"""A profile dimension TensorRT cannot take is refused by `trtls check`, located, before any build.

`trtls check` passed `max = [2147483648, 3, 32, 32]`, and the build then failed (exit 1): TensorRT's
`IOptimizationProfile::setDimensions` checks each dimension as a 32-bit integer (`int32_t x >= 0`, with TensorRT-RTX's
64-bit Dims too), so 2^31 reads negative ("Shape provided for max is inconsistent with other shapes"), and a larger
value passes only when its low 32 bits happen to read positive (2^32 + 8 built). Now TRT105 on the dimension for any
value past 2^31 - 1, from the same check the editor's diagnostics run, and `trtls build` starts no worker (exit 2); a
matrix's profile variant is held to the same rule. 2^31 - 1 is what the builder takes: checked clean and built, here
with TensorRT-RTX. Real recipes, real `trtls` processes, a real build."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

LIMIT = 2**31 - 1
WHY = "a TensorRT profile dimension is a 32-bit integer"


def _trtls(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "trtls", *args], capture_output=True, text=True, timeout=600)


def _demo_max(workspace: Path, first_dim: int) -> tuple[Path, int, int]:
    """The quickstart's `demo` profile with `max`'s first dimension replaced: (recipe, line, column of the value)."""
    recipe = workspace / "trtls.toml"
    old = "max = [8, 3, 32, 32]"
    text = recipe.read_text()
    assert old in text
    recipe.write_text(text.replace(old, f"max = [{first_dim}, 3, 32, 32]", 1))
    lines = recipe.read_text().splitlines()
    line = next(i for i, t in enumerate(lines) if t.startswith(f"max = [{first_dim},"))
    return recipe, line + 1, lines[line].index(str(first_dim)) + 1


@pytest.mark.parametrize("dim", [2**31, 2**32 + 8, 2**63 - 1])
def test_check_refuses_a_dimension_past_int32_on_the_dimension_and_build_starts_nothing(
    workspace: Path, dim: int
) -> None:
    recipe, line, col = _demo_max(workspace, dim)
    check = _trtls("check", str(workspace))
    said = f"{recipe}:{line}:{col}: TRT105 error: 'max' dimension 0 must be ≤ {LIMIT} ({WHY}), got {dim}"
    assert check.returncode == 2 and said in check.stdout.splitlines(), check.stdout + check.stderr
    assert f"{recipe}: 1 problem" in check.stdout

    build = _trtls("build", str(workspace), "--engine", "demo")
    assert build.returncode == 2 and f"got {dim}" in build.stdout + build.stderr, build.stdout + build.stderr
    assert not (workspace / "build").exists() and not (workspace / ".trtls" / "runs").exists()


def test_a_matrix_profile_variant_is_held_to_the_same_limit(workspace: Path) -> None:
    recipe = workspace / "trtls.toml"
    big = f'{{ input = "input", min = [1, 3, 32, 32], opt = [1, 3, 32, 32], max = [{2**31}, 3, 32, 32] }}'
    recipe.write_text(
        recipe.read_text()
        + f'\n[engines.demo.matrix]\noutput = "build/demo-{{profiles}}.engine"\nprofiles = {{ big = [{big}] }}\n'
    )
    line = len(recipe.read_text().splitlines())
    col = recipe.read_text().splitlines()[-1].index(str(2**31)) + 1
    check = _trtls("check", str(workspace))
    said = f"{recipe}:{line}:{col}: TRT105 error: 'max' dimension 0 must be ≤ {LIMIT} ({WHY}), got {2**31}"
    assert check.returncode == 2 and said in check.stdout.splitlines(), check.stdout + check.stderr


def test_the_largest_dimension_tensorrt_takes_is_checked_clean_and_builds(workspace: Path) -> None:
    _demo_max(workspace, LIMIT)
    check = _trtls("check", str(workspace))
    assert check.returncode == 0 and check.stdout.strip().endswith(": ok"), check.stdout + check.stderr
    build = _trtls("build", str(workspace), "--engine", "demo")
    assert build.returncode == 0, build.stdout + build.stderr
    assert (workspace / "build" / "demo.engine").stat().st_size > 0
