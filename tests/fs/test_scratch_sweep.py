"""A scratch folder whose maker was killed before its `finally` ran is removed by the next trtls process that makes
one in the same temp folder — and nothing else is (fs/scratch.py: `sweep_abandoned`).

Real child processes make real scratch folders and are SIGKILLed (a gate's artifact copy, a runtime call's
inputs: before, each such kill left a model's size in /tmp for good); a live maker's folder, an older mark, another
host's, a link, a FIFO for a mark and a folder of another name are left alone."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from trtls.fs import OWNED_MARK
from trtls.fs.scratch import sweep_abandoned

MAKER = """
import sys, tempfile
tempfile.tempdir = sys.argv[1]
from trtls.fs import scratch_dir
path = scratch_dir(prefix=sys.argv[2])
(path / "model.onnx").write_bytes(b"x" * 4096)  # what a gate's copy of the artifact would be
print(path, flush=True)
sys.stdin.readline()  # holds until the test closes stdin or kills it
"""


def maker(temp: Path, prefix: str) -> tuple[subprocess.Popen[str], Path]:
    proc = subprocess.Popen(
        [sys.executable, "-c", MAKER, str(temp), prefix], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    return proc, Path(proc.stdout.readline().strip())


def killed(temp: Path, prefix: str) -> Path:
    proc, path = maker(temp, prefix)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    return path


def planted(temp: Path, name: str, mark: str | None) -> Path:
    folder = temp / name
    folder.mkdir()
    if mark is not None:
        (folder / OWNED_MARK).write_text(mark)
    return folder


def test_only_a_folder_whose_maker_is_gone_is_swept(tmp_path: Path) -> None:
    temp = tmp_path / "temp"
    temp.mkdir()
    live_proc, live = maker(temp, "trtls-rt-")  # first: a maker's own first folder sweeps the temp folder
    dead = killed(temp, "trtls-gate4-")
    dead_mark = (dead / OWNED_MARK).read_text()
    assert dead_mark.startswith("scratch pid=") and "start=" in dead_mark
    here = os.uname().nodename
    boot = next(p for p in dead_mark.split() if p.startswith("start="))[len("start=") :].split(":")[0]
    kept = {
        "older mark": planted(temp, "trtls-old", "scratch\n"),
        "no mark": planted(temp, "trtls-nomark", None),
        "another host": planted(temp, "trtls-elsewhere", dead_mark.replace(f"host={here}", "host=another-host")),
        "another pid namespace": planted(temp, "trtls-container", dead_mark.replace("pidns=pid:[", "pidns=pid:[9")),
        "another name": planted(temp, "accept-copy", dead_mark),
    }
    outside = planted(tmp_path, "outside", dead_mark)
    (temp / "trtls-link").symlink_to(outside)
    fifo_folder = planted(temp, "trtls-fifo", None)
    os.mkfifo(fifo_folder / OWNED_MARK)  # opening it to read must not block the sweep
    where = dead_mark[dead_mark.index(" host=") + 1 :]
    reused = planted(temp, "trtls-reused", f"scratch pid={os.getpid()} start={boot}:1 {where}")
    try:
        removed = sweep_abandoned(temp)
        assert sorted(removed) == sorted([dead, reused])  # the killed maker's, and a pid that runs another process
        assert not dead.exists() and not reused.exists()
        assert live.is_dir() and (live / "model.onnx").is_file()  # its maker still runs
        assert all(folder.is_dir() for folder in kept.values()), kept
        assert fifo_folder.is_dir()
        assert (temp / "trtls-link").is_symlink() and (outside / OWNED_MARK).is_file()
    finally:
        assert live_proc.stdin is not None
        live_proc.stdin.close()
        live_proc.wait()


def test_the_next_trtls_process_to_make_a_scratch_folder_sweeps_a_killed_ones(tmp_path: Path) -> None:
    temp = tmp_path / "temp"
    temp.mkdir()
    dead = killed(temp, "trtls-rt-")
    assert (dead / "model.onnx").is_file()  # a kill leaves it
    proc, made = maker(temp, "trtls-accept-")
    assert proc.stdin is not None
    proc.stdin.close()
    proc.wait()
    assert not dead.exists()  # swept by the next maker's first scratch folder …
    assert made.is_dir()  # … which itself stays its maker's to remove
