"""Two machines publishing to one remote at the same moment: the same key, and two different keys.

The remote is the server docs/store.md tells users to run — nginx's WebDAV module (tests/store/nginx_dav.py), which
writes a PUT's body to a temp file and renames it into place — reached through a proxy in this test that makes the
race happen rather than hoping for it: every PUT is held with half its body sent to nginx until the other build's PUT
of the same area (`ac/` records, `cas/` engines) has come that far too, then both are let through together. A publish
asks `HEAD cas/<sha256>` first and skips the engine when the remote holds it; a held PUT is not stored yet, so both
builds send their engine, and both send their record (a record is always sent). Two real `trtls build`s, each its own
folder and local store (no local lock between them, as two machines), real TensorRT-RTX builds.

What must hold, whichever write lands last: the remote's record of a key is one build's record, whole, naming an
engine the remote holds whole (its sha256 and size are the record's); every blob's bytes are its name's; both builds
end `built` with their engine sent (no note), and a third machine reuses the engine from the remote. Nothing needed
fixing: a blob is named by its content and a record names only its own blob, and nginx replaces a file whole."""

from __future__ import annotations

import hashlib
import json
import shutil
import socket
import subprocess
import threading
from pathlib import Path
from typing import Any

from tests.store.helpers import build_cmd, entries, run_build, summaries, with_store
from tests.store.nginx_dav import DavServer
from tests.store.scripted_remote import Proxy, Request, pass_half, pass_rest

PAIR_WAIT_S = 40.0  # how long a held PUT waits for the other build's (a PUT's answer is waited for 60 s)


class RacingProxy(Proxy):
    """A loopback proxy in front of nginx. GET and HEAD pass straight through; a PUT is held, half its body sent to
    nginx, until a second PUT of its area is held the same way (`raced`), or PAIR_WAIT_S passes (`alone`)."""

    def __init__(self, upstream: str) -> None:
        self.pairs = {area: threading.Barrier(2, timeout=PAIR_WAIT_S) for area in ("ac", "cas")}
        self.raced: list[str] = []
        self.alone: list[str] = []
        self.answers: list[tuple[str, int]] = []  # request line, the status nginx answered
        super().__init__(upstream)

    def forward(self, conn: socket.socket, up: socket.socket, request: Request) -> None:
        if request.line.startswith("PUT "):
            self._put(conn, up, request)
        else:
            up.sendall(request.data)
        answer = b""
        while chunk := up.recv(1 << 16):  # nginx's answer as it comes, until it closes (Connection: close)
            conn.sendall(chunk)
            answer += chunk
        self.answers.append((request.line, int(answer.split(b" ", 2)[1])))

    def _put(self, conn: socket.socket, up: socket.socket, request: Request) -> None:
        length, rest = pass_half(conn, up, request)
        area = request.line.split()[1].split("/")[2]  # /cache/<area>/<name>
        try:
            self.pairs[area].wait()
            self.raced.append(area)
        except threading.BrokenBarrierError:
            self.alone.append(area)
        up.sendall(rest)
        assert pass_rest(conn, up, length, length // 2 + len(rest)), "the build sent less than its Content-Length"


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _folder(seeded: tuple[Path, dict], tmp_path: Path, name: str, url: str, level: int = 3) -> tuple[Path, Path]:
    ws, store = tmp_path / name, tmp_path / f"store-{name}"
    shutil.copytree(seeded[0].parent / "pristine", ws)
    recipe = ws / "trtls.toml"
    recipe.write_text(recipe.read_text().replace("optimization_level = 3", f"optimization_level = {level}", 1))
    with_store(ws, store, remote=url)
    return ws, store


def _both_build(*folders: Path) -> list[dict[str, Any]]:
    """Two real `trtls build`s at once; each one's one evidence record, after both exited 0 with no traceback."""
    pipe = subprocess.PIPE
    procs = [subprocess.Popen(build_cmd(ws), stdout=pipe, stderr=pipe, text=True) for ws in folders]
    ended = [p.communicate(timeout=600) for p in procs]
    for proc, (_, err) in zip(procs, ended, strict=True):
        assert proc.returncode == 0 and "Traceback" not in err, err[-3000:]
    out = []
    for ws in folders:
        (summary,) = summaries(ws)
        assert summary["outcome"] == "built" and summary["store"]["used"], summary
        assert not [w for w in summary["store"]["warnings"] if "remote" in w], summary["store"]["warnings"]
        out.append(summary)
    return out


def _held_whole(files: Path, key: str) -> dict[str, Any]:
    """The remote's record of `key`, after checking that the blob it names is there whole (its sha256 and size)."""
    record = json.loads((files / "ac" / key).read_bytes())
    blob = (files / "cas" / record["engine"]["sha256"]).read_bytes()
    assert _sha(blob) == record["engine"]["sha256"] and len(blob) == record["engine"]["size"], record
    return record


def _blobs_whole(files: Path) -> None:
    for blob in (files / "cas").iterdir():
        assert _sha(blob.read_bytes()) == blob.name, f"a torn or foreign blob: {blob.name}"


def test_two_builds_publishing_one_key_at_once_leave_one_whole_entry(
    seeded: tuple[Path, dict], nginx_dav: DavServer, tmp_path: Path
) -> None:
    proxy = RacingProxy(nginx_dav.url)
    try:
        (a, store_a), (b, store_b) = (_folder(seeded, tmp_path, n, proxy.url) for n in ("a", "b"))
        built = _both_build(a, b)
    finally:
        proxy.stop()
    key = str(built[0]["engineKey"])
    assert built[1]["engineKey"] == key, "two folders of the same recipe: one key"
    assert sorted(proxy.raced) == ["ac", "ac", "cas", "cas"] and proxy.alone == [], (proxy.raced, proxy.alone)
    puts = [(line.split()[1], status) for line, status in proxy.answers if line.startswith("PUT ")]
    assert len(puts) == 4 and all(status in (200, 201, 204) for _, status in puts), puts

    files = nginx_dav.files
    assert sorted(p.name for p in (files / "ac").iterdir()) == [key]
    record = _held_whole(files, key)
    local = {(store / "entries" / key / "entry.json").read_bytes() for store in (store_a, store_b)}
    assert (files / "ac" / key).read_bytes() in local, "the remote's record is neither build's, whole"
    _blobs_whole(files)
    for store in (store_a, store_b):
        assert [e.name for e in entries(store)] == [key]

    # a third machine, straight to nginx: the entry the race left is one it reuses, byte for byte
    c, store_c = _folder(seeded, tmp_path, "c", nginx_dav.url)
    done = run_build(c)
    assert done.returncode == 0, done.stderr[-3000:]
    (reused,) = summaries(c)
    assert reused["outcome"] == "reused" and reused["reusedFrom"]["buildId"] == record["build"]["buildId"], reused
    assert _sha((c / "build" / "demo.engine").read_bytes()) == record["engine"]["sha256"]
    assert [e.name for e in entries(store_c)] == [key]


def test_two_builds_publishing_two_keys_at_once_leave_both_entries_whole(
    seeded: tuple[Path, dict], nginx_dav: DavServer, tmp_path: Path
) -> None:
    proxy = RacingProxy(nginx_dav.url)
    try:
        a, store_a = _folder(seeded, tmp_path, "a", proxy.url)
        b, store_b = _folder(seeded, tmp_path, "b", proxy.url, level=2)
        built = _both_build(a, b)
    finally:
        proxy.stop()
    keys = [str(s["engineKey"]) for s in built]
    assert keys[0] != keys[1], "another optimization level: another key"
    assert sorted(proxy.raced) == ["ac", "ac", "cas", "cas"] and proxy.alone == [], (proxy.raced, proxy.alone)

    files = nginx_dav.files
    assert sorted(p.name for p in (files / "ac").iterdir()) == sorted(keys)
    for key, store, summary in zip(keys, (store_a, store_b), built, strict=True):
        record = _held_whole(files, key)
        assert (files / "ac" / key).read_bytes() == (store / "entries" / key / "entry.json").read_bytes()
        assert record["engine"]["sha256"] == summary["engineArtifact"]["sha256"]
    _blobs_whole(files)
