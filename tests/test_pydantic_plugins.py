"""trtls's own process loads no pydantic plugin (issue 31): the first model a process makes would scan every installed
distribution's entry points for them (~56 ms of a build's critical path on the 16-core host's Python) and run what it
finds. A real installed plugin (a distribution's `entry_points.txt` naming it on the path) and real `trtls check`
processes: not loaded; loaded when the person set PYDANTIC_DISABLE_PLUGINS themselves (theirs to decide)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import QUICKSTART


def _site_with_a_plugin(tmp_path: Path) -> Path:
    site = tmp_path / "site"
    dist = site / "loud_plugin-1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: loud-plugin\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[pydantic]\nloud = loud_plugin:plugin\n")
    (site / "loud_plugin.py").write_text(
        "import os\nopen(os.environ['PLUGIN_MARK'], 'w').close()\n"
        "class Plugin:\n    def new_schema_validator(self, *args, **kwargs):\n        return None, None, None\n"
        "plugin = Plugin()\n"
    )
    return site


def _check(tmp_path: Path, site: Path, **env: str) -> Path:
    mark = tmp_path / f"loaded-{len(env)}"
    base = {k: v for k, v in os.environ.items() if k != "PYDANTIC_DISABLE_PLUGINS"}
    path = os.pathsep.join(p for p in (str(site), base.get("PYTHONPATH")) if p)
    run_env = {**base, "PYTHONPATH": path, "PLUGIN_MARK": str(mark), **env}
    out = subprocess.run(
        [sys.executable, "-m", "trtls", "check", str(QUICKSTART / "trtls.toml")],
        env=run_env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "Traceback" not in out.stderr, out.stderr
    return mark


def test_trtls_loads_no_pydantic_plugin_unless_the_person_asks(tmp_path: Path, quickstart_models: Path) -> None:
    site = _site_with_a_plugin(tmp_path)
    assert not _check(tmp_path, site).exists(), "trtls's models made without the plugin scan"
    assert _check(tmp_path, site, PYDANTIC_DISABLE_PLUGINS="").exists(), "the person's own setting stands"
