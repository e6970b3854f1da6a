"""`trtls build --all` on a recipe whose engine has a [matrix] (issue 18): it builds each engine once with its own
settings, as docs/farm.md says (`--all --matrix` builds every cell), and it says which matrix it left out instead
of leaving it out silently. Real CLI, real build."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

MATRIX = """
[engines.demo.matrix]
output = "build/demo-o{optimization_level}.engine"
optimization_level = [0, 1]
"""


def test_all_says_which_matrix_it_left_out(workspace: Path) -> None:
    recipe = workspace / "trtls.toml"
    text = recipe.read_text()
    demo_only = text[: text.index("[engines.large]")]  # one engine keeps the build short
    recipe.write_text(demo_only + MATRIX)
    proc = subprocess.run(
        [sys.executable, "-m", "trtls.cli.main", "build", str(workspace), "--all"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "demo: built once with its own settings" in proc.stderr
    assert "[engines.demo.matrix] (2 cells) was left out: add --matrix to build every cell" in proc.stderr
    built = sorted(p.name for p in (workspace / "build").glob("*.engine"))
    assert built == ["demo.engine"]  # what the note says is what happened
