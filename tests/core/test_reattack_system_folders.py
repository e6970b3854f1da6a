"""`allow_outside` lets a write out of the recipe folder, but never into the file system's root or a system folder:
a recipe that wrote `allow_outside = ["/"]` (to be done with TRT117) passed `trtls check` with an output in `/etc`
or `/usr`, and `trtls build` — as root in CI — put the engine there (over `/etc/hosts` as readily as beside it).
Now TRT117 on the key, located, whatever `allow_outside` says; a recipe that itself lives in such a folder (a
container's `/usr/src/app`) still writes beside itself there. Real `trtls check` and `trtls build` processes."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from trtls.core.recipe import load_recipe


def _recipe(workspace: Path, output: str, allow: str = "/") -> Path:
    text = (workspace / "trtls.toml").read_text().replace('output = "build/demo.engine"', f'output = "{output}"', 1)
    (workspace / "trtls.toml").write_text(f'allow_outside = ["{allow}"]\n' + text)
    return workspace


def _trtls(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TRTLS_STORE": "off"}
    return subprocess.run([sys.executable, "-m", "trtls", *args], capture_output=True, text=True, env=env, timeout=600)


@pytest.mark.skipif(os.geteuid() != 0 or not os.access("/etc", os.W_OK), reason="a write into /etc needs root")
def test_allow_outside_never_lets_a_build_write_into_a_system_folder(workspace: Path) -> None:
    target = Path("/etc") / f"trtls-reattack-{uuid.uuid4().hex[:8]}.engine"
    ws = _recipe(workspace, str(target))
    try:
        check = _trtls("check", str(ws))
        assert check.returncode == 2 and "TRT117" in check.stdout and "system folder /etc" in check.stdout, check.stdout
        assert "trtls.toml:" in check.stdout  # located on the key
        build = _trtls("build", str(ws), "--engine", "demo")
        assert build.returncode == 2 and "TRT117" in build.stdout + build.stderr, build.stdout + build.stderr
        assert "Traceback" not in build.stderr
        assert not target.exists(), "the engine was written into /etc"
    finally:
        target.unlink(missing_ok=True)


@pytest.mark.parametrize(
    "output, why",
    [
        ("/etc/hosts", "system folder /etc"),
        ("/usr/lib/demo.engine", "system folder /usr"),
        ("/demo.engine", "file system's root folder"),
    ],
)
def test_the_check_refuses_the_root_and_system_folders_and_still_allows_a_folder_of_ones_own(
    workspace: Path, tmp_path: Path, output: str, why: str
) -> None:
    found = load_recipe(_recipe(workspace, output) / "trtls.toml").findings
    assert [f.code for f in found if f.path[:3] == ("engines", "demo", "output")] == ["TRT117"], found
    assert any(why in f.message for f in found), found
    mine = tmp_path / "engines" / "demo.engine"
    text = (workspace / "trtls.toml").read_text().replace(f'output = "{output}"', f'output = "{mine}"', 1)
    (workspace / "trtls.toml").write_text(text)
    assert not [f for f in load_recipe(workspace / "trtls.toml").findings if f.severity.value == "error"]


def test_a_path_a_shell_would_have_expanded_is_refused_before_it_makes_a_folder_called_tilde(workspace: Path) -> None:
    """`output = "~/engines/demo.engine"` made a folder literally called `~` in the recipe folder (trtls expands no
    `~` or `$HOME`): the trap of a later `rm -rf ~`. Refused (TRT102, located), nothing made; `build/~x.engine` (a
    name that merely holds the character) is not."""
    text = (workspace / "trtls.toml").read_text()
    for output, said in (("~/engines/demo.engine", "'~'"), ("$HOME/demo.engine", "'$HOME'"), ("./~me/x", "'~me'")):
        (workspace / "trtls.toml").write_text(text.replace('output = "build/demo.engine"', f'output = "{output}"', 1))
        check = _trtls("check", str(workspace))
        assert check.returncode == 2 and "TRT102" in check.stdout and said in check.stdout, check.stdout
        build = _trtls("build", str(workspace), "--engine", "demo")
        assert build.returncode == 2 and "Traceback" not in build.stderr, build.stdout + build.stderr
        assert not [p for p in workspace.iterdir() if p.name.startswith(("~", "$"))], "a folder called ~ was made"
    (workspace / "trtls.toml").write_text(text.replace('output = "build/demo.engine"', 'output = "build/~x.engine"', 1))
    assert _trtls("check", str(workspace)).returncode == 0
