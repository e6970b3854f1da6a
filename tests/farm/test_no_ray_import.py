"""Ray is an optional extra: a recipe without [cluster] never imports it, in the CLI or the language server's path;
a recipe with one reaches for it, and says so when it is missing. Each in a real child process in which Ray cannot
be imported at all (a finder that refuses it and records every attempt), so an import tried and caught counts too."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import QUICKSTART

NO_RAY = """
import atexit, sys
asked = []
class NoRay:
    def find_spec(self, name, path=None, target=None):
        if name == "ray" or name.startswith("ray."):
            asked.append(name)
            raise ImportError("No module named 'ray' (refused by the test)")
        return None
sys.meta_path.insert(0, NoRay())
atexit.register(lambda: print("ASKED", sorted(set(asked)), file=sys.stderr))
"""

WITHOUT_CLUSTER = (
    NO_RAY
    + """
from trtls.cli.main import main
code = main(["build", sys.argv[1], "--engine", "demo"])
assert code == 0, code
import trtls.lsp.server  # the language server's modules, as loaded by `trtls serve`
from trtls.builds.supervisor.matrix import plan
from trtls.core.recipe import load_recipe
loaded = load_recipe(sys.argv[1] + "/trtls.toml")
assert loaded.recipe.cluster is None and plan(loaded, ["demo"], True, {})
leaked = sorted(m for m in sys.modules if m == "ray" or m.startswith("ray.") or m.startswith("trtls.builds.farm"))
print("LEAKED", leaked)
sys.exit(1 if leaked else 0)
"""
)

WITH_CLUSTER = (
    NO_RAY
    + """
from trtls.cli.main import main
sys.exit(main(["build", sys.argv[1], "--matrix"]))
"""
)


def test_a_recipe_without_cluster_never_imports_ray(workspace: Path) -> None:
    r = subprocess.run(
        [sys.executable, "-c", WITHOUT_CLUSTER, str(workspace)], capture_output=True, text=True, timeout=600
    )
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "LEAKED []" in r.stdout
    assert "ASKED []" in r.stderr  # not even tried


def test_the_farm_sample_reaches_for_ray_because_it_has_a_cluster(tmp_path: Path, quickstart_models: Path) -> None:
    """The other half: with Ray missing, the farm sample's [cluster] is what asks for it, and the run stops with
    TRT234 (how to install it) before any cell is built."""
    samples = tmp_path / "samples"
    shutil.copytree(QUICKSTART.parent / "farm", samples / "farm", ignore=shutil.ignore_patterns(".trtls", "build"))
    (samples / "quickstart" / "models").mkdir(parents=True)
    shutil.copy(quickstart_models / "demo.onnx", samples / "quickstart" / "models" / "demo.onnx")
    r = subprocess.run(
        [sys.executable, "-c", WITH_CLUSTER, str(samples / "farm")], capture_output=True, text=True, timeout=600
    )
    assert r.returncode != 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "TRT234" in r.stderr and "pip install 'trtls[farm]'" in r.stderr, r.stderr[-2000:]
    assert "ASKED ['ray']" in r.stderr
    assert not list((samples / "farm").glob("build/*.engine"))


def test_ci_fails_the_farm_suite_when_ray_is_missing(tmp_path: Path) -> None:
    """tests/farm/conftest.py: with TRTLS_REQUIRE_FARM=1 (as .ci/run sets it) a missing Ray is an error, not a
    skip; without it, a skip that says why. A real pytest run in a child with a `ray` that cannot be imported, of a
    test on the session cluster and of one that starts its own instance (test_warm_farm.py: no module-level skip)."""
    import os

    fake = tmp_path / "no-ray" / "ray"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError(\"No module named 'ray' (refused by the test)\")\n")
    tests = [
        "tests/farm/test_matrix_on_cluster.py::test_a_label_no_node_has_is_refused_at_once",
        "tests/farm/test_warm_farm.py::test_ctrl_c_of_a_matrix_cancels_every_cell_and_leaves_nothing_running",
    ]
    outcomes = {}
    for required in ("1", ""):
        env = {**os.environ, "PYTHONPATH": str(fake.parent), "TRTLS_REQUIRE_FARM": required}
        r = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                *tests,
                "-q",
                "-rsE",
                "-p",
                "no:cacheprovider",
                "-p",
                "no:randomly",
                "-n",
                "0",
            ],
            capture_output=True,
            text=True,
            timeout=300,
            env=env,
            cwd=Path(__file__).resolve().parents[2],
        )
        outcomes[required] = (r.returncode, r.stdout)
    assert outcomes["1"][0] == 1 and "2 errors" in outcomes["1"][1], outcomes["1"][1][-3000:]
    errors = [line for line in outcomes["1"][1].splitlines() if line.startswith("ERROR ")]
    # each one errored at its setup, by the requirement (a module skipped at import shows as "found no collectors")
    assert all(any(line.split()[1] == test for line in errors) for test in tests), outcomes["1"][1][-3000:]
    failed = [ln for ln in outcomes["1"][1].splitlines() if ln.startswith("E ") and "Failed: Ray is required" in ln]
    assert len(failed) == 2 and all("TRTLS_REQUIRE_FARM=1" in ln for ln in failed), outcomes["1"][1][-3000:]
    skipped = outcomes[""][1][-3000:]
    assert outcomes[""][0] == 0 and "2 skipped" in skipped and "farm extra" in skipped, skipped
    assert all(f"SKIPPED [1] {test.split('::')[0]}" in skipped for test in tests), skipped
