"""Which recorded run the editor's lenses and the `onnx` hover read (report/capability_lens.latest_runs), on the
evidence of a real `trtls build` of the quickstart `demo`, with hostile neighbours made from that very record: a
newer record in a folder not named as trtls names a run, a run folder that is a symlink, a matrix cell, a `.trtls`
that leads out of the recipe's folder, an id that is a path, and a record whose node name is Markdown and escapes."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from trtls.report.capability_lens import capability_hover_text, capability_lens_title, latest_runs


@pytest.fixture
def built(workspace: Path) -> tuple[Path, dict[str, Any]]:
    done = subprocess.run(
        [sys.executable, "-m", "trtls", "build", str(workspace), "--engine", "demo", "--no-store"],
        cwd=workspace,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    [summary] = (workspace / ".trtls" / "runs").glob("*/summary.json")
    return summary.parent, json.loads(summary.read_text())


def _copy(run: Path, name: str, **changes: Any) -> Path:
    """Another run folder beside `run`, its record the real one with `changes`."""
    other = run.parent / name
    shutil.copytree(run, other)
    record = json.loads((other / "summary.json").read_text())
    record.update(changes)
    (other / "summary.json").write_text(json.dumps(record))
    return other


def test_only_real_run_folders_of_an_engine_table_count(built: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    run, record = built
    recipe = run.parents[2] / "trtls.toml"
    later = record["startedAt"] + 60
    assert latest_runs(recipe) == {"demo": run.name}
    _copy(run, "not-a-run-id", startedAt=later)  # not a name trtls gives a run: never listed
    outside = _copy(run, "demo-20991231-000000-aaaaaa", startedAt=later)
    moved = tmp_path / "elsewhere"
    shutil.move(outside, moved)
    os.symlink(moved, outside)  # a run folder that is a link: never followed
    _copy(run, "demo-20991231-000001-bbbbbb", startedAt=later, cell="demo[fp16]", parentId="m")  # a matrix cell
    assert latest_runs(recipe) == {"demo": run.name}
    newer = _copy(run, "demo-20991231-000002-cccccc", startedAt=later)
    assert latest_runs(recipe) == {"demo": newer.name}, "a newer record of the engine is read once it is there"


def test_a_trtls_folder_leading_out_of_the_recipe_is_not_read(
    built: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    run, _ = built
    ws = run.parents[2]
    moved = tmp_path / "other-trtls"
    shutil.move(ws / ".trtls", moved)
    os.symlink(moved, ws / ".trtls")
    assert latest_runs(ws / "trtls.toml") == {}


def test_ids_that_are_paths_read_nothing_and_a_records_words_are_text(built: tuple[Path, dict[str, Any]]) -> None:
    run, record = built
    recipe = run.parents[2] / "trtls.toml"
    for bad in ("..", "../runs/" + run.name, "", "/etc"):
        assert capability_lens_title(recipe, bad) is None and capability_hover_text(recipe, "demo", bad, None) is None
    node = {"index": 3, "name": "[x](http://a) *b*\x1b[31m", "op": "If", "reason": "<img src=x> no `importer`"}
    parser = {"supported": False, "nodes": [node]}
    refused = _copy(run, "demo-20991231-000003-dddddd", capability={"status": "refused", "parser": parser})
    said = capability_hover_text(recipe, "demo", refused.name, None)
    assert said is not None and "the parser refuses 1 node" in said
    assert r"'\[x\](http://a) \*b\*\\x1b\[31m' (If): \<img src=x\> no \`importer\`" in said, said
    assert "\x1b" not in said
    assert "sha256" not in said and "changed" not in said, "no freshness is claimed without a comparison"
    assert "not re-checked now" in (capability_hover_text(recipe, "demo", refused.name, "changed") or "")
