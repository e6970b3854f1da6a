"""The engine's view of a recipe (builds/avoidance/recipe_view.py): what decides whether an edited recipe may send
the last job ahead of its check. Every top-level table and the engine's own table are in it; comments, layout and
other engines' tables are not."""

from __future__ import annotations

import os
from pathlib import Path

from trtls.builds.avoidance.recipe_view import recipe_view

RECIPE = """\
[store]
mode = "read_write"

[engines.demo]
onnx = "models/demo.onnx"
output = "build/demo.engine"

[engines.demo.builder]
optimization_level = 3

[engines.other]
onnx = "models/other.onnx"
output = "build/other.engine"
"""


def _view(tmp_path: Path, text: str, engine: str = "demo") -> str | None:
    path = tmp_path / f"r{len(list(tmp_path.iterdir()))}.toml"
    path.write_text(text)
    return recipe_view(path, engine)


def test_comments_layout_and_other_engines_leave_the_view(tmp_path: Path) -> None:
    base = _view(tmp_path, RECIPE)
    assert base is not None and len(base) == 64
    spaced = RECIPE.replace("optimization_level = 3", "optimization_level  =  3")
    assert _view(tmp_path, "# a comment\n" + spaced) == base
    assert _view(tmp_path, RECIPE.replace('"models/other.onnx"', '"models/changed.onnx"')) == base
    assert _view(tmp_path, RECIPE + '\n[engines.third]\nonnx = "a.onnx"\noutput = "b.engine"\n') == base


def test_the_engines_own_table_and_every_top_level_table_are_in_the_view(tmp_path: Path) -> None:
    base = _view(tmp_path, RECIPE)
    assert _view(tmp_path, RECIPE.replace("optimization_level = 3", "optimization_level = 2")) != base
    assert _view(tmp_path, RECIPE.replace('"build/demo.engine"', '"build/demo2.engine"')) != base
    assert _view(tmp_path, RECIPE.replace('mode = "read_write"', 'mode = "read"')) != base
    assert _view(tmp_path, 'allow_outside = ["../x"]\n' + RECIPE) != base
    assert _view(tmp_path, RECIPE, "other") != base


def test_a_recipe_that_does_not_parse_or_lacks_the_engine_has_no_view(tmp_path: Path) -> None:
    assert _view(tmp_path, RECIPE + "\n[engines.demo\n") is None
    assert _view(tmp_path, RECIPE, "missing") is None
    fifo = tmp_path / "fifo.toml"
    os.mkfifo(fifo)
    assert recipe_view(fifo, "demo") is None  # never read: a FIFO would block the reader
