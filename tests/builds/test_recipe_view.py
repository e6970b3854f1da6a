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


NO_JOB = """\
[evidence]
keep_runs = 5

[engines.demo]
onnx = "models/demo.onnx"
output = "build/demo.engine"
cancel_grace_s = 10

[engines.demo.builder]
optimization_level = 3

[engines.demo.triage]
fail_regex = "boom"

[routes.r]
engine = "demo"
checkpoint = { path = "ckpt", id = "org/m", revision = "d065c296e0fef52b015f4755c02dda4b3064c1d2" }
intended_use = "a test"
allowed_licenses = ["mit"]
bundle = "build/r.bundle"
"""
# one edit to each table or key NO_JOB_READS names, each a valid recipe still
NO_JOB_EDITS = {
    ("recipe", "evidence"): ("keep_runs = 5", "keep_runs = 6"),
    ("recipe", "routes"): ('intended_use = "a test"', 'intended_use = "another test"'),
    ("engine", "cancel_grace_s"): ("cancel_grace_s = 10", "cancel_grace_s = 11"),
    ("engine", "triage"): ('fail_regex = "boom"', 'fail_regex = "bang"'),
}


def test_what_no_job_reads_is_outside_the_view_and_the_real_job_is_the_same(tmp_path: Path) -> None:
    """Each table and key `NO_JOB_READS` names, edited: the view is the same (the last job may go ahead of the check),
    and the job the real recipe models build from the edited recipe is the same as the one before — the claim the
    view rests on. An edit to a key the job reads (the output) changes both."""
    from trtls.builds.avoidance.recipe_view import NO_JOB_READS
    from trtls.builds.supervisor.job import worker_job
    from trtls.core.recipe import load_recipe

    assert sorted(NO_JOB_EDITS) == sorted((where, k) for where, keys in NO_JOB_READS.items() for k in keys)
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "demo.onnx").write_bytes(b"")
    (tmp_path / "ckpt").mkdir()
    recipe = tmp_path / "trtls.toml"

    def view_and_job(text: str) -> tuple[str | None, dict]:
        recipe.write_text(text)
        loaded = load_recipe(recipe, text)
        assert loaded.recipe is not None, [f.message for f in loaded.findings]
        return recipe_view(recipe, "demo"), worker_job(loaded, "demo", "demo-1")

    base_view, base_job = view_and_job(NO_JOB)
    assert base_view is not None
    for (where, key), (old, new) in NO_JOB_EDITS.items():
        assert old in NO_JOB, (where, key)
        assert view_and_job(NO_JOB.replace(old, new)) == (base_view, base_job), (where, key)
    view, job = view_and_job(NO_JOB.replace('"build/demo.engine"', '"build/demo2.engine"'))
    assert view != base_view and job != base_job
