"""pydantic's plugin loader stays unimported while every plugin is off (core/pydantic_plugins.py), and a person's
plugins still load exactly as pydantic loads them otherwise.

Real processes and a real pydantic plugin: a distribution on a temporary path whose `pydantic` entry point pydantic
discovers through `importlib.metadata`, as it would an installed one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

CHILD = """
import json, os, sys
sys.path.insert(0, sys.argv[1])
from trtls.core.pydantic_plugins import defer_plugin_loader
defer_plugin_loader()
import pydantic
class Recipe(pydantic.BaseModel):
    x: int
Recipe(x=1)
import counting_plugin
print(json.dumps({"calls": counting_plugin.CALLS, "metadata": "importlib.metadata" in sys.modules}))
"""

PLUGIN = """
CALLS = []
class Plugin:
    def new_schema_validator(self, schema, schema_type, schema_type_path, schema_kind, config, plugin_settings):
        CALLS.append(getattr(schema_type, "__name__", str(schema_type)))
        return None, None, None
plugin = Plugin()
"""


@pytest.fixture(scope="module")
def plugin_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    site = tmp_path_factory.mktemp("site")
    (site / "counting_plugin.py").write_text(PLUGIN)
    info = site / "counting_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: counting-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[pydantic]\ncounting = counting_plugin:plugin\n")
    return site


def _run(site: Path, disable: str | None) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PYDANTIC_DISABLE_PLUGINS"}
    if disable is not None:
        env["PYDANTIC_DISABLE_PLUGINS"] = disable
    argv = [sys.executable, "-c", CHILD, str(site)]
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout)


@pytest.mark.parametrize("disable", ["__all__", "1", "true"])
def test_every_plugin_off_imports_no_loader_and_runs_no_plugin(plugin_site: Path, disable: str) -> None:
    got = _run(plugin_site, disable)
    assert got == {"calls": [], "metadata": False}


@pytest.mark.parametrize("disable", [None, "another_plugin"])
def test_a_plugin_that_is_not_off_loads_through_pydantics_own_loader(plugin_site: Path, disable: str | None) -> None:
    got = _run(plugin_site, disable)
    assert got["calls"] == ["Recipe"] and got["metadata"] is True


def test_a_plugin_turned_off_by_name_is_left_out_as_pydantic_leaves_it(plugin_site: Path) -> None:
    got = _run(plugin_site, "counting")
    assert got == {"calls": [], "metadata": True}  # pydantic's loader read the entry points, and skipped this one


def test_a_recipe_check_from_the_program_imports_no_plugin_loader(workspace: Path) -> None:
    """The program sets every plugin off unless the person set the variable (cli/entry.py): a whole `trtls check`
    validates the recipe's models without importing `importlib.metadata` for pydantic."""
    env = {k: v for k, v in os.environ.items() if k != "PYDANTIC_DISABLE_PLUGINS"}
    code = (
        "import sys\nfrom trtls.cli.entry import main\ncode = main(['check', sys.argv[1]])\n"
        "print('importlib.metadata' in sys.modules, 'pydantic' in sys.modules)\nsys.exit(code)"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(workspace)], capture_output=True, text=True, env=env, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split()[-2:] == ["False", "True"], proc.stdout[-500:]
