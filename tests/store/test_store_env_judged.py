"""`TRTLS_STORE` is judged as `[store] path` is (one rule, one owner: `core.store_table.store_path_findings`): it
named a recipe's (empty) engine output folder and was accepted — `trtls build` made `build/` a store (its mark and
six folders beside the engine) and `trtls store gc` would then sweep it. Real `trtls` processes, real folders."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from trtls.fs.kinds import OWNED_MARK

RECIPE = """[engines.demo]
onnx = "model.onnx"
output = "build/demo.engine"
profiles = [{ input = "input", min = [1, 3, 32, 32], opt = [1, 3, 32, 32], max = [2, 3, 32, 32] }]
"""


def trtls(*args: str, cwd: Path, store: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TRTLS_STORE": store}
    return subprocess.run(
        [sys.executable, "-m", "trtls", *args], capture_output=True, text=True, timeout=300, cwd=cwd, env=env
    )


@pytest.fixture
def project(tmp_path: Path, quickstart_models: Path) -> Path:
    folder = tmp_path / "project"
    (folder / "build").mkdir(parents=True)
    (folder / "model.onnx").write_bytes((quickstart_models / "demo.onnx").read_bytes())
    (folder / "trtls.toml").write_text(RECIPE)
    return folder


@pytest.mark.parametrize("named", ["build", "{project}/build", "."])
def test_trtls_store_naming_a_folder_of_the_recipe_is_refused_like_store_path(project: Path, named: str) -> None:
    store = named.format(project=project)
    check = trtls("check", cwd=project, store=store)
    said = check.stdout + check.stderr
    assert check.returncode == 2 and f"{project / 'trtls.toml'}:1:1: TRT339 error: TRTLS_STORE: " in said, said
    build = trtls("build", "--engine", "demo", cwd=project, store=store)
    assert build.returncode == 2 and "TRT339" in build.stdout + build.stderr, build.stdout + build.stderr
    gc = trtls("store", "gc", cwd=project, store=store)
    assert gc.returncode == 2 and "TRT339" in gc.stdout + gc.stderr and "Traceback" not in gc.stderr
    assert sorted(p.name for p in (project / "build").iterdir()) == [], "the output folder was made a store"
    assert not (project / OWNED_MARK).exists()

    # the very same folder named by `[store] path` says the same, on the key
    (project / "trtls.toml").write_text(RECIPE + f'\n[store]\npath = "{store}"\n')
    table = trtls("check", cwd=project, store="off")
    assert table.returncode == 2 and "TRT339 error: [store] path: " in table.stdout + table.stderr


def test_a_store_beside_the_recipe_is_still_used(project: Path, tmp_path: Path) -> None:
    store = tmp_path / "store"
    build = trtls("build", "--engine", "demo", cwd=project, store=str(store))
    assert build.returncode == 0, build.stdout + build.stderr
    assert (store / OWNED_MARK).is_file() and len(list((store / "entries").iterdir())) == 1


@pytest.mark.parametrize("key", ["path", "signing_key_file"])
def test_an_empty_store_path_or_key_file_is_a_located_error_not_the_default(project: Path, key: str) -> None:
    """`[store] path = ""` was silently the per-user store (and an empty key file no key): a careless edit that
    sends every build's engines somewhere the recipe does not say."""
    (project / "trtls.toml").write_text(RECIPE + f'\n[store]\n{key} = " "\n')
    check = trtls("check", cwd=project, store="off")
    said = check.stdout + check.stderr
    assert check.returncode == 2 and f"TRT102 error: '{key}': Value error, is empty" in said, said


def test_a_relative_xdg_cache_home_is_ignored_as_the_spec_says(tmp_path: Path) -> None:
    """`XDG_CACHE_HOME=cache` put the default store in whatever folder a command ran in (a recipe's folder, beside
    its models); the XDG base directory specification says a relative path is invalid and ignored."""
    home, here = tmp_path / "home", tmp_path / "somewhere"
    home.mkdir()
    here.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "TRTLS_STORE"} | {"HOME": str(home)}
    relative, absolute = home / ".cache" / "trtls" / "store", tmp_path / "x" / "trtls" / "store"
    for xdg, store in (("cache", relative), (str(tmp_path / "x"), absolute)):
        argv, xdg_env = [sys.executable, "-m", "trtls", "store", "ls"], env | {"XDG_CACHE_HOME": xdg}
        done = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=here, env=xdg_env)
        assert done.returncode == 0 and done.stdout.startswith(f"{store} (read_write)"), done.stdout + done.stderr
    assert list(here.iterdir()) == []
