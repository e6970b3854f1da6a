"""A remote engine's way back (`engine_transfer.bring_engine`) through a real Ray actor on the test cluster: the chunks
are fetched on the event loop, hashed, written, fsynced and renamed on a thread of the transfer's own. Whatever
fails, the previous engine at the output is untouched and no temp file is left: a damaged engine or a broken stream is
TRT233, an output that cannot be written here TRT412.

The actor stands in for a node's host (`engine_chunks(path)` streams the file's bytes); the transport, the writer and
the files are real.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from trtls.builds.farm.engine_transfer import bring_engine

ENGINE = bytes(range(256)) * 40_000  # ~10 MB: two chunks of 8 MiB
PREVIOUS = b"vtrt the previous, good engine"


def chunk_actor(data: bytes, fail_at: int | None = None):
    import ray

    @ray.remote(num_cpus=0)
    class Node:
        def engine_chunks(self, path: str):
            for start in range(0, len(data), 8 << 20):
                if fail_at is not None and start >= fail_at:
                    raise OSError("the node's disk went away")
                yield data[start : start + (8 << 20)]

    return Node.remote()


def transfer(tmp_path: Path, sha: str) -> tuple[dict, Path, str, dict]:
    """A cell's job whose output holds a previous engine, the node's `artifact` line, its `build_finished`."""
    output = tmp_path / "ws" / "build" / "m.engine"
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_bytes(PREVIOUS)
    job = {"output": str(output), "build_id": "m-20261202-000000-abcdef", "write_root": str(tmp_path / "ws")}
    artifact = json.dumps({"v": 1, "type": "artifact", "action": "written", "kind": "engine", "path": "/node/m.engine"})
    finished = {"v": 1, "type": "build_finished", "t_ns": 1, "outcome": "built", "engine_sha256": sha}
    return job, output, artifact, finished


def lines(out: list[bytes]) -> list[dict]:
    return [json.loads(b) for b in out]


@pytest.mark.usefixtures("ray_cluster")
async def test_an_engine_arrives_whole_and_replaces_the_output(tmp_path: Path) -> None:
    job, output, artifact, finished = transfer(tmp_path, hashlib.sha256(ENGINE).hexdigest())
    got = lines(await bring_engine(chunk_actor(ENGINE), job, {"hostname": "n1"}, finished, [artifact.encode()]))
    assert [r["type"] for r in got] == ["artifact", "build_finished"]
    assert got[0]["path"] == str(output) and got[0]["size"] == len(ENGINE) and got[0]["node_path"] == "/node/m.engine"
    assert got[1]["outcome"] == "built" and "checked end to end" in got[1]["notes"][-1]
    assert output.read_bytes() == ENGINE
    assert not list(output.parent.glob("*.trtls-tmp-*"))


@pytest.mark.usefixtures("ray_cluster")
async def test_a_damaged_engine_or_a_broken_stream_is_trt233_and_the_previous_engine_stays(tmp_path: Path) -> None:
    for actor, sha in (
        (chunk_actor(ENGINE), "0" * 64),  # arrived whole, but not what the worker wrote
        (chunk_actor(ENGINE, fail_at=8 << 20), hashlib.sha256(ENGINE).hexdigest()),  # the stream broke mid-way
    ):
        job, output, artifact, finished = transfer(tmp_path, sha)
        got = lines(await bring_engine(actor, job, {"hostname": "n1"}, finished, [artifact.encode()]))
        assert [r["type"] for r in got] == ["log", "build_finished"]
        assert got[1]["outcome"] == "failed" and got[1]["error"].startswith("TRT233"), got[1]["error"]
        assert output.read_bytes() == PREVIOUS
        assert not list(output.parent.glob("*.trtls-tmp-*"))


@pytest.mark.usefixtures("ray_cluster")
async def test_an_output_folder_swapped_for_a_link_out_of_the_write_root_is_trt412_and_nothing_lands(
    tmp_path: Path,
) -> None:
    job, output, artifact, finished = transfer(tmp_path, hashlib.sha256(ENGINE).hexdigest())
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    output.unlink()
    output.parent.rmdir()
    output.parent.symlink_to(elsewhere, target_is_directory=True)  # after the recipe's folder was judged
    got = lines(await bring_engine(chunk_actor(ENGINE), job, {"hostname": "n1"}, finished, [artifact.encode()]))
    assert got[1]["outcome"] == "failed" and got[1]["error"].startswith("TRT412"), got[1]["error"]
    assert list(elsewhere.iterdir()) == []
