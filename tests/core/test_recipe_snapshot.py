"""One read per version of a recipe in a command (core.recipe_file.recipe_snapshot): the same snapshot while the
file is unchanged, a new one after any edit — even one that keeps its size and sets its mtime back (the version
holds the ctime, which cannot be set back) — and none remembered when a command did not turn it on (the language
server never does)."""

from __future__ import annotations

import os
from pathlib import Path

from trtls.core.recipe_file import recipe_snapshot, remember_snapshots


def test_a_command_reads_each_version_once_and_sees_an_edit_that_hides_in_size_and_mtime(tmp_path: Path) -> None:
    recipe = tmp_path / "trtls.toml"
    recipe.write_text('[engines.a]\nonnx = "a.onnx"\n')
    remember_snapshots(True)
    try:
        first = recipe_snapshot(recipe)
        assert recipe_snapshot(recipe) is first and first.data["engines"]["a"]["onnx"] == "a.onnx"
        st = os.stat(recipe)
        recipe.write_text('[engines.a]\nonnx = "b.onnx"\n')  # the same size
        os.utime(recipe, ns=(st.st_atime_ns, st.st_mtime_ns))  # and the same mtime
        again = recipe_snapshot(recipe)
        assert again is not first and again.data["engines"]["a"]["onnx"] == "b.onnx"
        assert again.sha256 != first.sha256
    finally:
        remember_snapshots(False)


def test_nothing_is_remembered_unless_a_command_turned_it_on(tmp_path: Path) -> None:
    recipe = tmp_path / "trtls.toml"
    recipe.write_text('[engines.a]\nonnx = "a.onnx"\n')
    assert recipe_snapshot(recipe) is not recipe_snapshot(recipe)  # read each time
