"""A rollback's pin that is there but cannot be read is never taken for "nothing pinned": a truncated pin, one
that is not JSON, or a symlink planted at `.trtls/engines/<name>.pin.json` made `trtls build` serve (or build) the
recipe's engine — the very one the user rolled back from — with exit 0 and no word. Now it is TRT338 (exit 1,
nothing built or restored over the rollback) naming the pin and why; `--unpin` removes it (a link itself, never what
it names) and says so. Real builds, a real store, real files and symlinks."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import pytest

from tests.store.conftest import copy_store
from tests.store.helpers import run_build, with_store
from trtls.builds.avoidance.freshness import build_lens_title, freshness_findings
from trtls.core.recipe import load_recipe


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("damage", ["truncated", "not a pin", "symlink"])
def test_a_damaged_pin_stops_the_build_and_unpin_removes_it(
    seeded: tuple[Path, dict], seed_ws: Path, tmp_path: Path, damage: str
) -> None:
    with_store(seed_ws, copy_store(seeded, tmp_path))
    pin = seed_ws / ".trtls" / "engines" / "demo.pin.json"
    pin.parent.mkdir(parents=True)
    output = seed_ws / "build" / "demo.engine"
    output.parent.mkdir()
    output.write_bytes(b"vtrt the engine the user rolled back to")
    outside = tmp_path / "outside.json"
    outside.write_text('{"format": "trtls.pin/1"}\n')
    if damage == "truncated":
        pin.write_text('{"format": "trtls.pin/1", "key": "ab')
    elif damage == "not a pin":
        pin.write_text('{"format": "something else"}\n')
    else:
        pin.symlink_to(outside)

    # the editor says it before any build, from the function every face's lens and diagnostics come from
    loaded = load_recipe(seed_ws / "trtls.toml")
    assert build_lens_title(loaded, "demo").startswith("⚠ the rollback's pin is damaged")
    (said,) = [f for f in freshness_findings(loaded) if f.code == "TRT338"]
    assert said.message.startswith(f"the rollback's pin {pin} ") and said.message.endswith("--unpin` removes it")

    done = run_build(seed_ws)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stdout + done.stderr
    assert f"TRT338 error: the rollback's pin {pin} " in done.stderr, done.stderr
    assert "nothing was built over the rollback; trtls build --unpin" in done.stderr
    assert output.read_bytes() == b"vtrt the engine the user rolled back to"
    engines = [sys.executable, "-m", "trtls", "engines", "demo", str(seed_ws)]
    listed = subprocess.run(engines, capture_output=True, text=True, timeout=120)
    assert f"warning: TRT338 the rollback's pin {pin} " in listed.stderr, listed.stderr

    unpinned = run_build(seed_ws, "--unpin")
    assert unpinned.returncode == 0, unpinned.stderr
    assert f"unpinned: the damaged pin {pin} (" in unpinned.stderr, unpinned.stderr
    assert not pin.is_symlink() and not pin.exists() and outside.read_text() == '{"format": "trtls.pin/1"}\n'
    store_engine = tmp_path / "store" / "entries" / seeded[1]["engineKey"] / "engine"
    assert sha(output) == sha(store_engine), "the recipe's engine, restored once the pin is gone"

    assert build_lens_title(load_recipe(seed_ws / "trtls.toml"), "demo").startswith("✓ up to date")
