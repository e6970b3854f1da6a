"""A remote store on a real nginx WebDAV server, with real `trtls build` processes and real TensorRT-RTX builds:
machine A builds and sends its engine (`cas/<sha256>`) and record (`ac/<key>`); machine B — another folder, an empty
local store, the same remote — reuses it without building; a remote that sends other bytes, or is down, never
stops a build."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.store.helpers import entries, probe_env, probes, run_build, summaries, with_store
from tests.store.nginx_dav import DavServer, free_port, start_dav
from trtls.store import entries as local_entries
from trtls.store import remote


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def with_remote(ws: Path, store: Path, url: str) -> None:
    with_store(ws, store)
    (ws / "trtls.toml").write_text((ws / "trtls.toml").read_text() + f'remote = "{url}"\n')


@dataclass
class Pushed:
    """What machine A's build left: its folder, its store, its evidence and what the remote then held."""

    ws: Path
    store: Path
    summary: dict[str, Any]
    files: Path  # a copy of the remote's files after A's build (ac/, cas/)
    access_log: str

    @property
    def key(self) -> str:
        return str(self.summary["engineKey"])

    @property
    def engine_sha(self) -> str:
        return str(self.summary["engineArtifact"]["sha256"])


@pytest.fixture(scope="module")
def pushed(tmp_path_factory: pytest.TempPathFactory, seeded: tuple[Path, dict]) -> Pushed:
    """Machine A: the quickstart with an empty local store and the remote; one real build of `demo`."""
    root = tmp_path_factory.mktemp("machine-a")
    server = start_dav(root / "nginx")
    try:
        ws = root / "a"
        shutil.copytree(seeded[0].parent / "pristine", ws)
        with_remote(ws, root / "store-a", server.url)
        done = run_build(ws)
        assert done.returncode == 0, done.stderr
        shutil.copytree(server.files, root / "remote-files")
        log = server.access_log()
    finally:
        server.stop()
    (summary,) = summaries(ws)
    return Pushed(ws, root / "store-a", summary, root / "remote-files", log)


def serve(pushed: Pushed, server: DavServer) -> None:
    """Put what A's build left on the remote into this test's own server."""
    shutil.copytree(pushed.files, server.files, dirs_exist_ok=True)


def machine_b(seeded: tuple[Path, dict], tmp_path: Path, url: str) -> tuple[Path, Path]:
    ws = tmp_path / "b"
    shutil.copytree(seeded[0].parent / "pristine", ws)
    store = tmp_path / "store-b"
    with_remote(ws, store, url)
    return ws, store


def test_a_build_sends_its_engine_then_its_record_to_the_remote(pushed: Pushed) -> None:
    assert pushed.summary["outcome"] == "built" and pushed.summary["store"]["used"]
    output = (pushed.ws / "build" / "demo.engine").read_bytes()
    assert sha(output) == pushed.engine_sha
    assert sorted(p.name for p in (pushed.files / "cas").iterdir()) == [pushed.engine_sha]
    assert (pushed.files / "cas" / pushed.engine_sha).read_bytes() == output
    assert sorted(p.name for p in (pushed.files / "ac").iterdir()) == [pushed.key]
    (local,) = entries(pushed.store)
    record = (pushed.files / "ac" / pushed.key).read_bytes()
    assert record == (local / "entry.json").read_bytes()  # the record as stored locally, byte for byte
    assert json.loads(record)["engine"] == {"sha256": pushed.engine_sha, "size": len(output)}
    puts = re.findall(r'"PUT /cache/(ac|cas)/', pushed.access_log)
    assert puts == ["cas", "ac"]  # the engine first: whoever finds the record finds its blob


def test_another_machine_reuses_the_remote_engine_without_building(
    pushed: Pushed, nginx_dav: DavServer, seeded: tuple[Path, dict], tmp_path: Path
) -> None:
    serve(pushed, nginx_dav)
    ws, store = machine_b(seeded, tmp_path, nginx_dav.url)
    probe = tmp_path / "probe"
    done = run_build(ws, env=probe_env(probe))
    assert done.returncode == 0, done.stderr
    assert f"demo: up to date — engine from build {pushed.summary['buildId']} " in done.stdout
    assert probes(probe, "worker") == [] and probes(probe, "tensorrt") == []
    (s,) = summaries(ws)
    assert s["outcome"] == "reused" and s["workerPid"] is None and s["engineKey"] == pushed.key
    assert s["reusedFrom"]["buildId"] == pushed.summary["buildId"]
    assert (ws / "build" / "demo.engine").read_bytes() == (pushed.ws / "build" / "demo.engine").read_bytes()
    assert f"fetched from the remote store {nginx_dav.url}" in s["store"]["warnings"]
    # it is now a local entry, the remote's record byte for byte: the next build does not ask the remote
    assert [e.name for e in entries(store)] == [pushed.key]
    fetched = (store / "entries" / pushed.key / "entry.json").read_bytes()
    assert fetched == (pushed.files / "ac" / pushed.key).read_bytes()
    assert list((store / "tmp").iterdir()) == []
    asked = nginx_dav.access_log().count("GET /cache/")
    again = run_build(ws)
    assert again.returncode == 0 and summaries(ws)[-1]["outcome"] == "reused", again.stderr
    assert nginx_dav.access_log().count("GET /cache/") == asked


def test_a_remote_that_sends_other_bytes_is_not_used_and_is_repaired(
    pushed: Pushed, nginx_dav: DavServer, seeded: tuple[Path, dict], tmp_path: Path
) -> None:
    serve(pushed, nginx_dav)
    blob = nginx_dav.files / "cas" / pushed.engine_sha
    data = bytearray(blob.read_bytes())
    data[len(data) // 2] ^= 0xFF  # the same size: only the hash can tell
    blob.write_bytes(bytes(data))
    ws, store = machine_b(seeded, tmp_path, nginx_dav.url)
    probe = tmp_path / "probe"
    done = run_build(ws, env=probe_env(probe))
    assert done.returncode == 0, done.stderr
    (s,) = summaries(ws)
    assert s["outcome"] == "built" and len(probes(probe, "worker")) == 1
    notes = [w for w in s["store"]["warnings"] if nginx_dav.url in w]
    assert any("is not used for" in w and "bytes are not the ones its record names" in w for w in notes), notes
    assert not any("fetched from" in w for w in s["store"]["warnings"])
    built = (ws / "build" / "demo.engine").read_bytes()
    assert sha(built) == s["engineArtifact"]["sha256"]
    assert [e.name for e in entries(store)] == [pushed.key]  # B's own build, published locally
    # B's publish was sent on: the remote's record for the key now names a blob that holds its bytes
    record = json.loads((nginx_dav.files / "ac" / pushed.key).read_text())
    assert sha((nginx_dav.files / "cas" / record["engine"]["sha256"]).read_bytes()) == record["engine"]["sha256"]


def test_a_remote_that_is_down_does_not_stop_a_build(seeded: tuple[Path, dict], tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}/cache"  # nothing listens there
    ws, store = machine_b(seeded, tmp_path, url)
    done = run_build(ws)
    assert done.returncode == 0, done.stderr
    (s,) = summaries(ws)
    assert s["outcome"] == "built" and [e.name for e in entries(store)] == [s["engineKey"]]
    notes = [w for w in s["store"]["warnings"] if url in w]
    assert any("could not be reached" in w for w in notes) and any("was not sent" in w for w in notes), notes
    assert len(notes) == 2, notes  # the lookup's and the publish's: a remote that is down is not asked again
    assert "Traceback" not in done.stderr


def test_the_remote_module_reads_records_as_the_store_writes_them() -> None:
    assert remote.ENTRY_FORMAT == local_entries.ENTRY_FORMAT and remote.RECORD_LIMIT == local_entries.RECORD_LIMIT


def test_the_remote_can_come_from_the_environment(
    pushed: Pushed, nginx_dav: DavServer, seeded: tuple[Path, dict], tmp_path: Path
) -> None:
    serve(pushed, nginx_dav)
    ws = tmp_path / "b"
    shutil.copytree(seeded[0].parent / "pristine", ws)
    with_store(ws, tmp_path / "store-b")  # no `remote` in the recipe: TRTLS_STORE_REMOTE names it
    done = run_build(ws, env={**os.environ, "TRTLS_STORE_REMOTE": nginx_dav.url + "/"})
    assert done.returncode == 0, done.stderr
    (s,) = summaries(ws)
    assert s["outcome"] == "reused" and f"fetched from the remote store {nginx_dav.url}" in s["store"]["warnings"]
