"""A bound that is not a number is bad input, not "no bound" (exit 2, nothing removed): `trtls store gc --max-size
abc` (or `0`, `-5`, `1e999`, `nan`) evicted nothing and exited 0 as if collected, and `trtls gc --max-size-mb nan`
removed runs (NaN compares false with everything) while `--max-age-days nan` kept all and exited 0. Real `trtls`
processes on a real store and a real evidence folder."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from trtls.store.entries import Store


def trtls(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "trtls", *args], cwd=cwd, capture_output=True, text=True, timeout=120)


def tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.mark.parametrize("size", ["abc", "0", "-5", "1e999", "nan", "", "5 parsecs"])
def test_store_gc_refuses_a_max_size_that_is_not_a_size(tmp_path: Path, size: str) -> None:
    store = tmp_path / "store"
    Store(store).check()  # a store trtls made
    (store / "tmp" / f"tmp-publish-{'a' * 64}-999999-1").mkdir()  # a killed publish's leftover gc would remove
    os.utime(store / "tmp" / f"tmp-publish-{'a' * 64}-999999-1", (time.time() - 7200,) * 2)
    (tmp_path / "trtls.toml").write_text(f'[store]\npath = "{store}"\n')
    before = tree(store)
    done = trtls("store", "gc", "--max-size", size, cwd=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stdout + done.stderr
    assert f"trtls store gc: --max-size {size!r} is not a size" in done.stderr and "nothing removed" in done.stderr
    assert tree(store) == before
    assert trtls("store", "gc", "--max-size", "5GiB", cwd=tmp_path).returncode == 0
    assert tree(store) != before, "a real size collects (the leftover goes)"


@pytest.mark.parametrize("args", [("--max-size-mb", "nan"), ("--max-age-days", "nan"), ("--keep-runs", "nan")])
def test_gc_refuses_nan_bounds(tmp_path: Path, args: tuple[str, str]) -> None:
    runs = tmp_path / ".trtls" / "runs"
    for i in range(3):
        run = runs / f"demo-2020010{i}-000000-abcdef"
        run.mkdir(parents=True)
        (run / "summary.json").write_text('{"engine": "demo", "outcome": "failed"}\n')
    before = tree(tmp_path)
    done = trtls("gc", *args, cwd=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stdout + done.stderr
    assert args[0] in done.stderr
    assert tree(tmp_path) == before
