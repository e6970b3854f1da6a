"""A recipe value of the wrong TOML type is a located error, never converted.

pydantic's lax mode read `optimization_level = "3"` as the integer 3 (and `keep_evidence = "yes"` as true,
`max = [8.0, …]` as 8): `trtls check` said ok and the build ran with a value the recipe never wrote. Every table of
an engine's recipe now shares one strict configuration (`core.validation.RECIPE_TABLE`): TRT102 on the value, in
TOML's words, exit 2 from `trtls check` (as for any bad input) and from `trtls build`, which builds nothing. An
integer still is a number (`cancel_grace_s = 10`, the quickstart's own). Real recipes, real `trtls` processes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest


def _trtls(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "trtls", *args], capture_output=True, text=True, timeout=600)


def _edit(workspace: Path, old: str, new: str) -> tuple[Path, int, int]:
    """The quickstart recipe with its first `old` replaced by `new`: (recipe, line, column of the new value)."""
    recipe = workspace / "trtls.toml"
    text = recipe.read_text()
    assert old in text
    recipe.write_text(text.replace(old, new, 1))
    lines = recipe.read_text().splitlines()
    line = next(i for i, t in enumerate(lines) if t == new.splitlines()[-1])
    value = new.splitlines()[-1].split(" = ", 1)[1]
    return recipe, line + 1, lines[line].index(value) + 1


def test_a_quoted_optimization_level_is_a_located_error_and_nothing_is_built(workspace: Path) -> None:
    recipe, line, col = _edit(workspace, "optimization_level = 3", 'optimization_level = "3"')
    check = _trtls("check", str(workspace))
    said = (
        f"{recipe}:{line}:{col}: TRT102 error: 'optimization_level' must be an integer, not the string '3' "
        "(write 3 without quotes)"
    )
    assert check.returncode == 2 and check.stdout.splitlines() == [said, f"{recipe}: 1 problem"], check.stdout

    (finding,) = json.loads(_trtls("check", str(workspace), "--format", "json").stdout)["findings"]
    assert finding["path"] == ["engines", "demo", "builder", "optimization_level"]
    assert (finding["code"], finding["line"], finding["column"]) == ("TRT102", line, col)

    build = _trtls("build", str(workspace), "--engine", "demo")
    assert build.returncode == 2 and "'optimization_level' must be an integer" in build.stdout + build.stderr
    assert not (workspace / "build").exists() and not (workspace / ".trtls" / "runs").exists()


@pytest.mark.parametrize(
    ("old", "new", "said"),
    [
        (
            "optimization_level = 3",
            "optimization_level = 3.0",
            "'optimization_level' must be an integer, not the number 3.0",
        ),
        ("optimization_level = 3", "optimization_level = true", "'optimization_level' must be an integer, not true"),
        (
            "optimization_level = 3",
            'optimization_level = 3\nmemory_pool_limits = { workspace_mib = "1024" }',
            "'workspace_mib' must be an integer, not the string '1024' (write 1024 without quotes)",
        ),
        (
            "optimization_level = 3",
            "optimization_level = 3\ntf32 = 1",
            "'tf32' must be true or false, not the number 1",
        ),
        (
            "cancel_grace_s = 10",
            'cancel_grace_s = "10"',
            "'cancel_grace_s' must be a number, not the string '10' (write 10 without quotes)",
        ),
        ("cancel_grace_s = 10", 'cancel_grace_s = 10\nkeep_evidence = "yes"', "'keep_evidence' must be true or false"),
        ("max = [8, 3, 32, 32]", "max = [8.0, 3, 32, 32]", "'max[0]' must be an integer, not the number 8.0"),
    ],
)
def test_every_build_setting_takes_only_its_own_toml_type(workspace: Path, old: str, new: str, said: str) -> None:
    recipe, line, _ = _edit(workspace, old, new)
    check = _trtls("check", str(workspace))
    assert check.returncode == 2, check.stdout + check.stderr
    (finding,) = [s for s in check.stdout.splitlines() if "TRT102" in s]
    assert finding.startswith(f"{recipe}:{line}:") and f"TRT102 error: {said}" in finding, finding


def test_the_quickstart_as_written_still_checks_clean(workspace: Path) -> None:
    check = _trtls("check", str(workspace))  # `cancel_grace_s = 10`: an integer is a number
    assert check.returncode == 0 and check.stdout.strip().endswith(": ok"), check.stdout + check.stderr
