"""Issue 32 item 2, the builder's native library: the key named the builder by module and version only, so a library
replaced in place at the same version (a patched `libtensorrt_onnxparser_rtx.so.1`, a tree copied over another) kept
the key — "up to date" with an engine another library built, on the fast path and the full path alike. The key now
holds the sha256 of each native library the builder loads (through a per-user digest cache: a stat each when warm),
and the fast path's memo their stat. Real `trtls build` processes with the real TensorRT-RTX, reached through a
PYTHONPATH folder whose ONNX parser library is a copy this test changes (one byte of its `.comment` section, which
nothing loads)."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.store.conftest import copy_store
from tests.store.helpers import run_build, summaries, with_store

PARSER = "libtensorrt_onnxparser_rtx.so.1"


def _site_with_a_parser_copy(folder: Path) -> Path:
    """A PYTHONPATH folder with the real tensorrt_rtx packages linked in (no *.dist-info: the version comes from the
    bindings' `__version__` line) and `tensorrt_rtx_libs` a folder of its own: its `__init__.py` (which loads every
    `*.so*` beside it) and the ONNX parser copied, the builder library linked."""
    spec = importlib.util.find_spec("tensorrt_rtx")  # found, not imported
    assert spec is not None and spec.submodule_search_locations
    real_site = Path(next(iter(spec.submodule_search_locations))).parent
    folder.mkdir()
    for package in ("tensorrt_rtx", "tensorrt_rtx_bindings"):
        (folder / package).symlink_to(real_site / package)
    libs = folder / "tensorrt_rtx_libs"
    libs.mkdir()
    for item in (real_site / "tensorrt_rtx_libs").iterdir():
        if item.name in ("__init__.py", PARSER):
            shutil.copy2(item, libs / item.name)
        elif item.name != "__pycache__":
            (libs / item.name).symlink_to(item)
    return folder


def _set_a_comment_byte(library: Path, to: bytes) -> None:
    """Change one byte in place (same size, same inode): the first letter of the compiler's note in `.comment`."""
    at = library.read_bytes().index(b"CC: (") - 1
    with library.open("r+b") as fh:
        fh.seek(at)
        fh.write(to)


def _fast_path_holds(ws: Path, env: dict[str, str]) -> bool:
    """Whether the fast path's memo still answers for `demo` (asked in a child: the builder is found as a build finds
    it, on the child's PYTHONPATH)."""
    code = (
        "import sys; from pathlib import Path; from trtls.builds.avoidance.memo import look;"
        "print(look(Path(sys.argv[1]), 'demo').memo is not None)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(ws / "trtls.toml")], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip() == "True"


def test_a_builder_library_changed_in_place_at_the_same_version_is_rebuilt_on_both_paths(
    seeded: tuple[Path, dict], seed_ws: Path, tmp_path: Path
) -> None:
    with_store(seed_ws, copy_store(seeded, tmp_path))
    site = _site_with_a_parser_copy(tmp_path / "site")
    env = {**os.environ, "PYTHONPATH": str(site), "PYTHONDONTWRITEBYTECODE": "1"}

    assert run_build(seed_ws, env=env).returncode == 0
    built = summaries(seed_ws)[-1]
    assert built["outcome"] == "built" and built["store"]["warnings"] == []
    assert run_build(seed_ws, env=env).returncode == 0
    assert summaries(seed_ws)[-1]["outcome"] == "reused" and _fast_path_holds(seed_ws, env)

    # the fast path: its memo keeps the library's stat, so it no longer answers; the full path's key differs
    _set_a_comment_byte(site / "tensorrt_rtx_libs" / PARSER, b"g")
    assert not _fast_path_holds(seed_ws, env), "the memo still answered for a builder library changed in place"
    again = run_build(seed_ws, env=env)
    assert again.returncode == 0, again.stderr
    rebuilt = summaries(seed_ws)[-1]
    assert rebuilt["outcome"] == "built", "an engine another builder library built was served as up to date"
    assert rebuilt["tensorrtVersion"] == built["tensorrtVersion"] and rebuilt["engineKey"] != built["engineKey"]
    named = f"builder tensorrt_rtx library {PARSER} bytes changed"
    assert named in rebuilt["rebuiltBecause"], rebuilt["rebuiltBecause"]

    # the full path alone (no memo, as a fresh checkout's first build): the key hashes the library's bytes
    for memo in (seed_ws / ".trtls" / "engines").glob("*.hit.json"):
        memo.unlink()
    _set_a_comment_byte(site / "tensorrt_rtx_libs" / PARSER, b"X")
    third = run_build(seed_ws, env=env)
    assert third.returncode == 0, third.stderr
    last = summaries(seed_ws)[-1]
    assert last["outcome"] == "built" and last["engineKey"] not in (built["engineKey"], rebuilt["engineKey"])
    assert named in last["rebuiltBecause"], last["rebuiltBecause"]
    # put back as it was: the first key, served from the store
    _set_a_comment_byte(site / "tensorrt_rtx_libs" / PARSER, b"G")
    assert run_build(seed_ws, env=env).returncode == 0
    served = summaries(seed_ws)[-1]
    assert served["outcome"] == "reused" and served["engineKey"] == built["engineKey"]


def _library_entries(digests: Path) -> list[str]:
    import json

    if not digests.exists():
        return []
    return sorted(p for p in json.loads(digests.read_text())["files"] if Path(p).name.startswith("libtensorrt"))


def test_the_library_digests_are_cached_per_account_else_in_the_recipes_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Hashed once on a host (TensorRT-RTX's library is 234 MB): in this account's cache folder, shared by every
    checkout; an account with no home folder (a CI runner, a service) keeps them in the recipe's digest cache, so
    they are not hashed again on every key."""
    from tests.onnx_files.external_layouts import build
    from trtls.store.key import engine_key

    model, _ = build(tmp_path / "ws", "initializer")
    state = tmp_path / "ws" / ".trtls"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    (tmp_path / "cache").mkdir()
    key = engine_key({"onnx": str(model)}, state)
    assert set(key.parts["builder"]["libraries"]) >= {
        f"tensorrt_rtx_libs/{PARSER}",
        "tensorrt_rtx_libs/libtensorrt_rtx.so.1",
    }
    assert len(_library_entries(tmp_path / "cache" / "trtls" / "builder-digests.json")) == 2
    assert _library_entries(state / "digests.json") == []
    assert key.parts["paths"]["builder"].endswith("tensorrt_rtx/__init__.py")

    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "no-such-home"))
    again = engine_key({"onnx": str(model)}, state)
    assert again.hex == key.hex
    assert len(_library_entries(state / "digests.json")) == 2
