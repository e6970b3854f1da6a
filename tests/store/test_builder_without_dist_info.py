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
