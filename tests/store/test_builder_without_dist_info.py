"""Issue 32 item 2, a builder with no `*.dist-info` beside it (a TensorRT package tree copied or linked onto
PYTHONPATH): its key said `version: []` whatever TensorRT it was, so after that tree was swapped for another version
in place (the same folder names) both the fast path and the key said "up to date" and served the other version's
engine. The key reads the version from the builder's own `__version__` line and the fast path's memo keeps that
file's stat. Real `trtls build` processes with the real TensorRT-RTX, reached through a PYTHONPATH folder of links."""

from __future__ import annotations

import importlib.util
import os
import re
from pathlib import Path

from tests.store.conftest import copy_store
from tests.store.helpers import run_build, summaries, with_store


def _linked_site(folder: Path) -> Path:
    """A PYTHONPATH folder with the real tensorrt_rtx packages linked in and no *.dist-info; the bindings' `__init__.py`
    (the `__version__` line) is a copy this test can change, as a swapped tree would."""
    spec = importlib.util.find_spec("tensorrt_rtx")  # found, not imported
    assert spec is not None and spec.submodule_search_locations
    real_site = Path(next(iter(spec.submodule_search_locations))).parent
    folder.mkdir()
    (folder / "tensorrt_rtx").symlink_to(real_site / "tensorrt_rtx")
    (folder / "tensorrt_rtx_libs").symlink_to(real_site / "tensorrt_rtx_libs")
    bindings = folder / "tensorrt_rtx_bindings"
    bindings.mkdir()
    for item in (real_site / "tensorrt_rtx_bindings").iterdir():
        if item.name == "__init__.py":
            (bindings / item.name).write_text(item.read_text())
        elif item.name != "__pycache__":
            (bindings / item.name).symlink_to(item)
    return folder


def test_a_builder_tree_swapped_in_place_on_pythonpath_is_rebuilt_not_served(
    seeded: tuple[Path, dict], seed_ws: Path, tmp_path: Path
) -> None:
    with_store(seed_ws, copy_store(seeded, tmp_path))
    site = _linked_site(tmp_path / "site")
    env = {**os.environ, "PYTHONPATH": str(site), "PYTHONDONTWRITEBYTECODE": "1"}

    first = run_build(seed_ws, env=env)
    assert first.returncode == 0, first.stderr
    built = summaries(seed_ws)[-1]
    version = built["tensorrtVersion"]
    assert built["outcome"] == "built" and built["store"]["warnings"] == []
    assert run_build(seed_ws, env=env).returncode == 0
    assert summaries(seed_ws)[-1]["outcome"] == "reused"  # the same tree: a hit

    init = site / "tensorrt_rtx_bindings" / "__init__.py"
    text = init.read_text()
    swapped = version + "9"  # another TensorRT in the same folders, without a dist-info to say so
    init.write_text(re.sub(r'(?m)^__version__ = ".*"$', f'__version__ = "{swapped}"', text, count=1))

    again = run_build(seed_ws, env=env)
    assert again.returncode == 0, again.stderr
    rebuilt = summaries(seed_ws)[-1]
    assert rebuilt["outcome"] == "built", "an engine of another builder version was served as up to date"
    assert rebuilt["tensorrtVersion"] == swapped and rebuilt["engineKey"] != built["engineKey"]
    assert any(swapped in reason for reason in rebuilt["rebuiltBecause"]), rebuilt["rebuiltBecause"]
    assert rebuilt["store"]["warnings"] == []  # published under the key of the version that built it
    assert run_build(seed_ws, env=env).returncode == 0
    served = summaries(seed_ws)[-1]
    assert served["outcome"] == "reused" and served["engineKey"] == rebuilt["engineKey"]


def test_a_builder_the_preference_tries_first_put_on_pythonpath_ends_the_fast_path(
    seeded: tuple[Path, dict], seed_ws: Path, tmp_path: Path
) -> None:
    """`auto` prefers full TensorRT: one put on PYTHONPATH (pip --target, a .pth) is the builder the key names from
    then on. The fast path's memo watched only the site of the module it was built with (tensorrt_rtx), so it said
    "up to date" with the TensorRT-RTX engine while the full path said "rebuilding because: builder tensorrt_rtx →
    tensorrt". The module here is a stand-in that cannot be imported (no full TensorRT on this machine): the worker
    falls back to TensorRT-RTX and the engine is not stored under the other builder's key — what matters is that the
    fast path no longer answers for a builder the key would not name."""
    with_store(seed_ws, copy_store(seeded, tmp_path))
    for _ in range(2):
        assert run_build(seed_ws).returncode == 0
    hit = summaries(seed_ws)[-1]
    assert hit["outcome"] == "reused" and any("not re-read" in n for n in hit["notes"]), hit["notes"]

    site = tmp_path / "full-trt"
    (site / "tensorrt").mkdir(parents=True)
    (site / "tensorrt" / "__init__.py").write_text("raise ImportError('a stand-in for full TensorRT (a test)')\n")
    (site / "tensorrt-10.9.0.34.dist-info").mkdir()
    env = {**os.environ, "PYTHONPATH": str(site), "PYTHONDONTWRITEBYTECODE": "1"}
    done = run_build(seed_ws, env=env)
    assert done.returncode == 0, done.stderr
    after = summaries(seed_ws)[-1]
    assert after["outcome"] == "built", "the fast path served the engine of a builder the key no longer names"
    assert any("tensorrt 10.9.0.34" in r for r in after["rebuiltBecause"]), after["rebuiltBecause"]
