"""A hostile remote store's answers, from a real socket server on a loopback port that says exactly what a test
scripts: headers trickled a byte at a time (each byte within the socket's own timeout) held a build — and its
Ctrl-C — for as long as the server liked; an engine body trickled the same; a `Content-Length: ²` ended the build in a
traceback (`str.isdigit` takes it, `int` does not); a record claiming 100 MiB was downloaded into a store of 1 MiB.
Now the whole request is bounded (its socket is shut down at the bound), a length is ASCII digits or none, and an
engine larger than the store can take is refused before a byte of it comes."""

from __future__ import annotations

import hashlib
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.store.scripted_remote import ScriptedServer
from trtls.store import remote, remote_http
from trtls.store.config import parse_size
from trtls.store.entries import Store
from trtls.store.key import key_of_parts

PARTS = {"format": "forged", "forged": "hostile"}
KEY = key_of_parts(PARTS)


def _record(size: int, sha: str) -> bytes:
    record = {"format": "trtls.store-entry/1", "key": KEY, "parts": PARTS, "engine": {"sha256": sha, "size": size}}
    return json.dumps({**record, "build": {"buildId": "build-elsewhere"}}).encode()


@pytest.fixture(autouse=True)
def fresh_memory() -> Iterator[None]:
    remote.forget_remotes()
    yield
    remote.forget_remotes()


def _get_in_a_thread(store: Store) -> tuple[threading.Thread, list[object]]:
    got: list[object] = []
    thread = threading.Thread(target=lambda: got.append(store.get(KEY)), daemon=True)
    thread.start()
    return thread, got


def _trickled_engine(engine: bytes, sha: str) -> Callable[[str, socket.socket], None]:
    """A remote whose record names `engine` at once and whose engine then comes a byte every 0.3 s."""

    def answer(line: str, conn: socket.socket) -> None:
        if " /cache/ac/" in line:
            body = _record(len(engine), sha)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
            return
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(engine))
        for byte in engine:
            conn.sendall(bytes([byte]))
            time.sleep(0.3)

    return answer


def test_headers_trickled_a_byte_at_a_time_are_given_up_at_the_requests_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(remote_http, "RECORD_WAIT_S", 2.0)  # the bound, scaled down; each byte comes within 5 s

    def trickle(line: str, conn: socket.socket) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\nX-Slow: ")
        while True:
            conn.sendall(b"a")
            time.sleep(0.3)

    server = ScriptedServer(trickle)
    try:
        store = Store(tmp_path / "store", remote=server.url)
        store.check()
        thread, got = _get_in_a_thread(store)
        thread.join(120)  # a bound for something that must happen (the old code never returned), not a speed
        assert not thread.is_alive(), "a remote trickling its headers held the lookup past every bound"
        assert got == [None]
        (note,) = store.notes
        assert note.startswith(f"the remote store {server.url} was not used") and "too slowly" in note, note
    finally:
        server.stop()


def test_an_engine_trickled_a_byte_at_a_time_is_given_up_at_its_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = b"E" * 4096
    sha = hashlib.sha256(engine).hexdigest()
    monkeypatch.setattr(remote_http, "MIN_RATE", 1 << 40)  # the engine's share of the bound: nothing
    monkeypatch.setattr(remote, "MIN_RATE", 1 << 40)

    server = ScriptedServer(_trickled_engine(engine, sha))
    monkeypatch.setattr(remote, "_request", _with_whole(remote_http.request, 2.0))
    try:
        store = Store(tmp_path / "store", remote=server.url)
        store.check()
        thread, got = _get_in_a_thread(store)
        thread.join(120)
        assert not thread.is_alive(), "a remote trickling its engine held the lookup past its bound"
        assert got == [None] and any("was not used" in n for n in store.notes), store.notes
        assert not list((tmp_path / "store" / "entries").glob("*"))
    finally:
        server.stop()


def test_an_engine_trickled_under_the_rate_is_given_up_as_it_comes_not_at_its_sizes_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rate is judged as the bytes come: a record claiming a large engine (its size's time at 4 MiB/s: long) whose
    bytes trickle is given up once the grace has passed and the bytes are behind the rate."""
    engine = b"E" * 4096
    sha = hashlib.sha256(engine).hexdigest()
    monkeypatch.setattr(remote, "ENGINE_GRACE_S", 1.0)  # the grace, scaled down; the rate as it is (4 MiB/s)

    server = ScriptedServer(_trickled_engine(engine, sha))
    try:
        store = Store(tmp_path / "store", remote=server.url)
        store.check()
        thread, got = _get_in_a_thread(store)
        thread.join(120)
        assert not thread.is_alive() and got == [None], "a trickled engine was waited for past the rate"
        assert any("too slowly" in n for n in store.notes), store.notes
    finally:
        server.stop()


def _with_whole(request: Callable[..., object], whole: float) -> Callable[..., object]:
    """`remote_http.request` with every request's whole bound at `whole` seconds (the engine's is 30 s + its size's)."""

    def bounded(url: str, method: str, target: str, **asked: Any) -> object:
        return request(url, method, target, **{**asked, "whole": min(whole, asked.get("whole", whole))})

    return bounded


@pytest.mark.parametrize("length", ["²", "³", "1e3", "-5"])
def test_a_content_length_that_is_not_ascii_digits_is_no_length_never_a_traceback(tmp_path: Path, length: str) -> None:
    engine = b"an engine " * 100
    sha = hashlib.sha256(engine).hexdigest()
    body = _record(len(engine), sha)

    def answer(line: str, conn: socket.socket) -> None:
        data = body if " /cache/ac/" in line else engine
        conn.sendall(
            b"HTTP/1.1 200 OK\r\nContent-Length: " + length.encode("latin-1") + b"\r\nConnection: close\r\n\r\n"
        )
        conn.sendall(data)

    server = ScriptedServer(answer)
    try:
        store = Store(tmp_path / "store", remote=server.url)
        store.check()
        entry = store.get(KEY)  # the length said nothing: the bytes and their sha256 decide
        assert entry is not None and entry.engine.read_bytes() == engine, store.notes
        assert remote_http.content_length({"Content-Length": length}) is None
    finally:
        server.stop()


def test_an_engine_larger_than_the_store_can_take_is_refused_before_a_byte_comes(tmp_path: Path) -> None:
    def answer(line: str, conn: socket.socket) -> None:
        body = _record(100 << 20, "ab" * 32)
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body)

    server = ScriptedServer(answer)
    try:
        store = Store(tmp_path / "store", remote=server.url, max_size=1 << 20)
        store.check()
        assert store.get(KEY) is None
        (note,) = store.notes
        assert "more than this store can take" in note, note
        assert [r for r in server.requests if "/cas/" in r] == [], "the engine was asked for"
    finally:
        server.stop()


def test_a_size_of_four_hundred_digits_is_no_size_never_an_overflow(tmp_path: Path) -> None:
    """`[store] max_size = "999…9"` and `store gc --max-size 999…9` ended in OverflowError (a float infinity), and
    `trtls check` said ok: one rule (`core.store_table.parse_size`) for the check, the store and gc."""
    from trtls.core.recipe import load_recipe

    assert parse_size("9" * 400) is None and parse_size("9" * 400 + " GiB") is None
    assert parse_size("20 GiB") == 20 << 30
    recipe = tmp_path / "trtls.toml"
    recipe.write_text(f'[engines.demo]\nonnx = "m.onnx"\noutput = "b/d.engine"\n\n[store]\nmax_size = "{"9" * 400}"\n')
    assert any(f.code == "TRT102" and "max_size" in f.message for f in load_recipe(recipe).findings)
