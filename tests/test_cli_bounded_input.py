"""Bounded input at the command line (issue 22, items 4 and 8): every command that reads a recipe goes through the
one bounded reader (core.recipe_file) the language server uses — a FIFO is refused before it is opened (it used to
block `trtls build`, `route build` and `gc` forever), `/dev/zero` before it is read (it used to grow to a
MemoryError or the OOM killer), a recipe over the bound is one located TRT125 instead of minutes of checking.
Real `trtls` processes under a 1.5 GB address-space limit; the subprocess timeout only keeps a regression from
hanging the suite (a hang is a failure, not a measurement)."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from trtls.core.recipe_file import MAX_RECIPE_BYTES


def _trtls(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (1536 << 20, 1536 << 20))

    return subprocess.run(
        [sys.executable, "-m", "trtls", *args], cwd=cwd, capture_output=True, text=True, timeout=120, preexec_fn=limit
    )


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    folder = tmp_path / "fifo"
    folder.mkdir()
    os.mkfifo(folder / "trtls.toml")
    return folder


@pytest.mark.parametrize(
    "args",
    [
        ("build", "{}", "--engine", "demo"),
        ("check", "{}"),
        ("gates", "{}"),
        ("route", "lock", "{}", "--route", "r"),
        ("route", "build", "{}", "--route", "r"),
    ],  # fmt: skip
    ids=lambda a: " ".join(a[:2]),
)
def test_a_fifo_recipe_is_refused_without_blocking(fifo: Path, args: tuple[str, ...]) -> None:
    done = _trtls(*(str(fifo) if a == "{}" else a for a in args), cwd=fifo.parent)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "TRT104" in done.stderr and "Traceback" not in done.stderr


def test_gc_of_a_folder_whose_recipe_is_a_fifo_does_not_block(fifo: Path) -> None:
    done = _trtls("gc", str(fifo), cwd=fifo.parent)
    assert done.returncode == 0 and "Traceback" not in done.stderr  # retention falls back to its defaults


def test_a_device_is_refused_before_it_is_read(tmp_path: Path) -> None:
    done = _trtls("build", "/dev/zero", "--engine", "demo", cwd=tmp_path)
    assert done.returncode == 2, done.stderr[-2000:]
    assert "TRT104" in done.stderr and "character device" in done.stderr and "MemoryError" not in done.stderr


@pytest.mark.parametrize("command", [("check",), ("build", "--engine", "demo")])
def test_a_recipe_over_the_bound_is_one_located_trt125(tmp_path: Path, command: tuple[str, ...]) -> None:
    (tmp_path / "trtls.toml").write_text("# a comment line\n" * (4 * MAX_RECIPE_BYTES // 17))
    done = _trtls(command[0], str(tmp_path), *command[1:], cwd=tmp_path)
    assert done.returncode == 2, done.stderr[-2000:]
    assert f"{tmp_path / 'trtls.toml'}:1:1: TRT125" in done.stdout + done.stderr
