"""The builds package's writes stay where the recipe's check put them, and a hostile `.trtls` or output folder is a
located refusal, never a traceback (issue 27 item 9; the states `tests/fuzz/test_hostile_fs.py` found):

* a restore from the store writes in the write root judged when the recipe loaded: an output folder swapped for a
  symlink leading out of the recipe's folder (no `allow_outside`) is refused (TRT118), nothing lands outside;
* orphan recovery never follows a `.trtls` or `.trtls/runs` that is a symlink;
* a rollback's TRT338 names the known-good record it refused (a symlink, a FIFO).

Real files, real symlinks and FIFOs, a real store seeded by a real TensorRT-RTX build."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from tests.conftest import QUICKSTART
from tests.store import conftest as store_fixtures
from tests.store.conftest import copy_store
from tests.store.helpers import with_store
from trtls.builds.avoidance import lookup as avoidance
from trtls.builds.avoidance.restore import restore_now
from trtls.builds.avoidance.rollback import RollbackError, rollback_target
from trtls.builds.supervisor.orphans import recover_orphans
from trtls.core.recipe import load_recipe

seeded = store_fixtures.seeded
seed_ws = store_fixtures.seed_ws


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_restore_into_output_folder_swapped_for_a_link_out_is_refused(
    seeded: tuple[Path, dict], seed_ws: Path, tmp_path: Path
) -> None:
    """The output folder becomes a symlink leading out after the recipe loaded: the restore is refused, not
    written through it (before: the folder it led to was taken as the write root and the engine landed there)."""
    with_store(seed_ws, copy_store(seeded, tmp_path))
    recipe = seed_ws / "trtls.toml"
    loaded = load_recipe(recipe)
    outside = tmp_path / "outside"
    outside.mkdir()
    shutil.rmtree(seed_ws / "build", ignore_errors=True)
    (seed_ws / "build").symlink_to(outside, target_is_directory=True)
    use = avoidance.prepare(loaded, "demo")
    try:
        assert use.store is not None and use.key is not None, use.not_used
        entry = use.store.get(use.key.hex)
        assert entry is not None, "the seeded store holds demo's key"
        assert restore_now(use, recipe, entry, "demo-wiring-test") is None
    finally:
        use.release()
    assert list(outside.iterdir()) == [], "nothing is written outside the recipe's folder"
    assert any(w.startswith("TRT118 ") for w in use.warnings), use.warnings


def _planted_run(trtls: Path) -> Path:
    run = trtls / "runs" / "demo-20260101-000000-abcdef"
    run.mkdir(parents=True)
    record = run / "running.json"
    record.write_text(json.dumps({"buildId": run.name, "supervisorPid": 2**22 + 12345, "job": {}}))
    return record


@pytest.mark.parametrize("swapped", [".trtls", ".trtls/runs"])
def test_orphan_recovery_never_follows_a_swapped_trtls(tmp_path: Path, swapped: str) -> None:
    """A `.trtls` (or its `runs`) swapped for a symlink to a folder holding a dead build's record: nothing is
    recovered there and nothing there changes (before: the link was followed and the record 'recovered')."""
    project, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    project.mkdir()
    _planted_run(elsewhere / ".trtls")
    if swapped != ".trtls":
        (project / ".trtls").mkdir()
    target = elsewhere / swapped
    (project / swapped).symlink_to(target, target_is_directory=True)
    before = _snapshot(elsewhere)
    assert recover_orphans(project / ".trtls") == []
    from trtls.builds.supervisor.running_record import running_records

    assert running_records(project / ".trtls") == []
    assert _snapshot(elsewhere) == before


@pytest.fixture
def quickstart(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    shutil.copytree(QUICKSTART, ws, ignore=shutil.ignore_patterns(".trtls", "build"))
    return ws


@pytest.mark.parametrize("planted", ["symlink", "fifo"])
def test_rollback_names_the_refused_known_good_record(quickstart: Path, tmp_path: Path, planted: str) -> None:
    """`.trtls/engines/demo.json` is a symlink (to a file outside) or a FIFO: the TRT338 says that record was not
    read, by name (before: 'no earlier known-good engine', with nothing to look at)."""
    record = quickstart / ".trtls" / "engines" / "demo.json"
    record.parent.mkdir(parents=True)
    precious = tmp_path / "precious.json"
    precious.write_text('{"precious": true}\n')
    if planted == "symlink":
        record.symlink_to(precious)
    else:
        os.mkfifo(record)
    with pytest.raises(RollbackError) as caught:
        rollback_target(load_recipe(quickstart / "trtls.toml"), "demo", None)
    assert caught.value.code == "TRT338"
    assert str(record) in str(caught.value), str(caught.value)
    assert precious.read_text() == '{"precious": true}\n'


def test_fast_path_needs_the_builder_found_now(
    seeded: tuple[Path, dict], seed_ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 32 item 2: the fast path's memo holds only while the builder module found NOW through sys.path is the
    one it remembered; another `tensorrt_rtx` put first on the path (PYTHONPATH), with its own dist-info version,
    is another builder (before: the remembered site's folders were compared with themselves: 'up to date')."""
    from tests.store.helpers import run_build
    from trtls.builds.avoidance import memo as reuse

    with_store(seed_ws, copy_store(seeded, tmp_path))
    done = run_build(seed_ws)
    assert done.returncode == 0, done.stderr
    memo = json.loads(reuse.memo_path(seed_ws / ".trtls", "demo").read_text())
    recipe = seed_ws / "trtls.toml"
    module = seeded[1]["builderModule"]  # the builder the seed was built with
    assert reuse._memo_holds(memo, recipe, "demo"), "the memo holds while nothing changed"
    site = tmp_path / "other-site"
    (site / module).mkdir(parents=True)
    (site / module / "__init__.py").write_text("__version__ = '99.0'\n")
    (site / f"{module}-99.0.dist-info").mkdir()
    monkeypatch.syspath_prepend(str(site))
    for name in [m for m in sys.modules if m == module or m.startswith(f"{module}.")]:
        monkeypatch.delitem(sys.modules, name)
    assert reuse._builder_site(module) == str(site)
    assert not reuse._memo_holds(memo, recipe, "demo", edited=True), "another builder on the path is not up to date"
