"""Ray is an optional extra: a recipe without [cluster] never imports it, in the CLI or the language server's path."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import QUICKSTART

PROBE = """
import sys
from trtls.cli.main import main
code = main(["build", sys.argv[1], "--engine", "demo"])
assert code == 0, code
import trtls.lsp.server  # the language server's modules, as loaded by `trtls serve`
from trtls.builds.matrix import plan
from trtls.core.recipe import load_recipe
loaded = load_recipe(sys.argv[1] + "/trtls.toml")
assert loaded.recipe.cluster is None and plan(loaded, ["demo"], True, {})
leaked = sorted(m for m in sys.modules if m == "ray" or m.startswith("ray.") or m.startswith("trtls.builds.farm"))
print("LEAKED", leaked)
sys.exit(1 if leaked else 0)
"""


def test_a_recipe_without_cluster_never_imports_ray(workspace) -> None:
    r = subprocess.run([sys.executable, "-c", PROBE, str(workspace)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "LEAKED []" in r.stdout


def test_the_farm_sample_needs_ray_only_because_it_has_a_cluster() -> None:
    from trtls.core.recipe import load_recipe

    loaded = load_recipe(QUICKSTART.parent / "farm" / "trtls.toml")
    assert loaded.recipe is not None and loaded.recipe.cluster is not None, loaded.findings
