"""A node sends back only what its cell built: `engine_chunks` streams a regular file of that cell's job folder and
nothing else (a path outside it, or a symlink inside it pointing out, is refused before a byte is read), and the job
folder is then removed by descriptor from the node's marked `jobs` folder (issue 27: reads and deletes through the
door). Plain Python, a real child process standing in for the worker: no Ray needed."""

from __future__ import annotations

import hashlib
import secrets
import shutil
from pathlib import Path

import pytest

from trtls.builds.farm.cell_runner import CellRun
from trtls.core.paths import UnsafeWrite


def test_a_node_sends_back_only_a_regular_file_of_its_cells_job_folder(tmp_path: Path) -> None:
    run = CellRun(f"test{secrets.token_hex(6)}", None, fetch=lambda data: data)
    try:
        onnx = b"an ONNX file's bytes"
        job = {"build_id": "b1", "output": str(tmp_path / "out.engine"), "onnx": "models/m.onnx"}
        worker = ["{python}", "-c", "import sys; sys.stdin.readline()"]  # reads its job line, builds nothing
        events = list(run.run(job, hashlib.sha256(onnx).hexdigest(), [onnx], False, worker))
        assert events[-1]["exit"] == 0
        assert run.job_dir is not None and run.job_dir.is_dir()
        secret = tmp_path / "secret.bin"
        secret.write_bytes(b"precious")
        with pytest.raises(UnsafeWrite):
            list(run.engine_chunks(str(secret)))  # outside the job folder
        (run.job_dir / "out.engine").symlink_to(secret)
        with pytest.raises(UnsafeWrite):
            list(run.engine_chunks(str(run.job_dir / "out.engine")))  # inside, but a link leading out
        (run.job_dir / "built.engine").write_bytes(b"E" * 10)
        assert b"".join(run.engine_chunks(str(run.job_dir / "built.engine"))) == b"E" * 10
        assert not run.job_dir.exists()  # removed once sent
        assert secret.read_bytes() == b"precious"
    finally:
        shutil.rmtree(run.scratch, ignore_errors=True)
