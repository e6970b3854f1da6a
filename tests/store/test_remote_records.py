"""What a remote store holds, on a real nginx WebDAV server, through the store's own API (no build needed): one blob
per engine however many keys name it; a record that is not the key's entry (parts of another key, another key's
record, no team signature, an engine of other bytes or another length) is refused, never kept, and not asked for
again; a read-only local store says what it cannot keep; `[store] remote` is a URL without credentials."""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.store.forged import forged_entry
from tests.store.nginx_dav import DavServer, start_dav
from trtls.core.recipe import load_recipe
from trtls.store import remote
from trtls.store.entries import Store
from trtls.store.key import key_of_parts
from trtls.store.signing import sign


@pytest.fixture(autouse=True)
def fresh_memory() -> Iterator[None]:
    """Each test starts as a new process would: a port reused by a later test's server is a new remote."""
    remote.forget_remotes()
    yield
    remote.forget_remotes()


def puts(server: DavServer, area: str) -> list[str]:
    return re.findall(rf'"PUT /cache/{area}/([0-9a-f]+) ', server.access_log())


def gets(server: DavServer, area: str) -> list[str]:
    return re.findall(rf'"GET /cache/{area}/([0-9a-f]+) ', server.access_log())


def test_two_keys_with_one_engine_share_one_blob(nginx_dav: DavServer, tmp_path: Path) -> None:
    a = Store(tmp_path / "store-a", remote=nginx_dav.url)
    data = b"one engine for two keys " * 1000
    one = forged_entry(a, tmp_path, "one", data)
    two = forged_entry(a, tmp_path, "two", data)
    assert one.key != two.key and one.sha256 == two.sha256
    assert sorted(p.name for p in (nginx_dav.files / "cas").iterdir()) == [one.sha256]
    assert sorted(p.name for p in (nginx_dav.files / "ac").iterdir()) == sorted([one.key, two.key])
    assert puts(nginx_dav, "cas") == [one.sha256]  # the second publish found the blob there (HEAD) and sent none
    assert a.notes == []
    b = Store(tmp_path / "store-b", remote=nginx_dav.url)
    b.check()
    for key in (one.key, two.key):
        entry = b.get(key)
        assert entry is not None and entry.engine.read_bytes() == data, b.notes
    assert b.notes == [f"fetched from the remote store {nginx_dav.url}"]


def _plant(server: DavServer, record: dict, key: str, engine: bytes) -> None:
    (server.files / "ac").mkdir(parents=True, exist_ok=True)
    (server.files / "cas").mkdir(parents=True, exist_ok=True)
    (server.files / "ac" / key).write_text(json.dumps(record))
    (server.files / "cas" / hashlib.sha256(engine).hexdigest()).write_bytes(engine)


def _record(parts: dict, engine: bytes) -> dict:
    return {
        "format": "trtls.store-entry/1",
        "key": key_of_parts(parts),
        "parts": parts,
        "engine": {"sha256": hashlib.sha256(engine).hexdigest(), "size": len(engine)},
        "build": {"buildId": "build-elsewhere"},
    }


ENGINE = b"an engine from another machine " * 500
PARTS = {"format": "forged", "forged": "remote"}
KEY = key_of_parts(PARTS)


def _parts_of_another_key(server: DavServer) -> str:
    record = _record(PARTS, ENGINE)
    record["parts"] = {**PARTS, "forged": "another"}  # the content now says another key; `key` still says KEY
    _plant(server, record, KEY, ENGINE)
    return "its record's key does not match its parts"


def _another_keys_record(server: DavServer) -> str:
    other = {**PARTS, "forged": "another"}
    _plant(server, _record(other, ENGINE), KEY, ENGINE)  # a whole, valid record, of another key
    return "its record is of another key"


def _other_bytes(server: DavServer) -> str:
    _plant(server, _record(PARTS, ENGINE), KEY, ENGINE)
    blob = server.files / "cas" / hashlib.sha256(ENGINE).hexdigest()
    blob.write_bytes(ENGINE.replace(b"another", b"ANOTHER", 1))
    return "its engine's bytes are not the ones its record names"


def _longer(server: DavServer) -> str:
    _plant(server, _record(PARTS, ENGINE), KEY, ENGINE)
    (server.files / "cas" / hashlib.sha256(ENGINE).hexdigest()).write_bytes(ENGINE + b"and more")
    return f"its engine is {len(ENGINE) + 8} bytes, not the {len(ENGINE)} its record says"


def _no_blob(server: DavServer) -> str:
    _plant(server, _record(PARTS, ENGINE), KEY, ENGINE)
    (server.files / "cas" / hashlib.sha256(ENGINE).hexdigest()).unlink()
    return "which it does not hold"


def _not_json(server: DavServer) -> str:
    _plant(server, _record(PARTS, ENGINE), KEY, ENGINE)
    (server.files / "ac" / KEY).write_bytes(b"<html>a proxy's error page</html>")
    return "its record is not JSON"


def _too_deep(server: DavServer) -> str:
    _plant(server, _record(PARTS, ENGINE), KEY, ENGINE)
    (server.files / "ac" / KEY).write_bytes(b"[" * 200_000)  # deeper than the parser's recursion
    return "its record is not JSON"


BAD = [_parts_of_another_key, _another_keys_record, _other_bytes, _longer, _no_blob, _not_json, _too_deep]


@pytest.mark.parametrize("plant", BAD, ids=[f.__name__.strip("_") for f in BAD])
def test_a_record_that_is_not_the_keys_entry_is_refused_and_not_asked_again(
    nginx_dav: DavServer, tmp_path: Path, plant: object
) -> None:
    said = plant(nginx_dav)  # type: ignore[operator]
    store = Store(tmp_path / "store", remote=nginx_dav.url)
    store.check()
    assert store.get(KEY) is None
    (note,) = store.notes
    assert note.startswith(f"the remote store {nginx_dav.url} is not used for {KEY[:12]}: ") and said in note, note
    assert list((store.root / "entries").iterdir()) == [] and list((store.root / "tmp").iterdir()) == []
    asked = len(gets(nginx_dav, "ac"))
    assert store.get(KEY) is None and Store(tmp_path / "store", remote=nginx_dav.url).get(KEY) is None
    assert len(gets(nginx_dav, "ac")) == asked == 1  # a remote that sent a bad record is not asked for it again


def test_a_signed_store_refuses_an_unsigned_remote_record_and_takes_a_signed_one(
    nginx_dav: DavServer, tmp_path: Path
) -> None:
    team_key = tmp_path / "team.key"
    team_key.write_text(os.urandom(32).hex())
    team_key.chmod(0o600)
    _plant(nginx_dav, _record(PARTS, ENGINE), KEY, ENGINE)
    store = Store(tmp_path / "store", remote=nginx_dav.url, signing_key_file=team_key)
    store.check()
    assert store.get(KEY) is None and "its record is not signed with the team's key" in store.notes[0]
    remote.forget_remotes()
    record = _record(PARTS, ENGINE)
    record["signature"] = sign(record, store.secret() or b"")
    _plant(nginx_dav, record, KEY, ENGINE)
    signed = Store(tmp_path / "store", remote=nginx_dav.url, signing_key_file=team_key)
    entry = signed.get(KEY)
    assert entry is not None and entry.engine.read_bytes() == ENGINE and entry.build["buildId"] == "build-elsewhere"


def test_a_miss_is_quiet_and_a_read_only_store_says_what_it_cannot_keep(nginx_dav: DavServer, tmp_path: Path) -> None:
    store = Store(tmp_path / "store", remote=nginx_dav.url)
    store.check()
    assert store.get(KEY) is None and store.notes == []  # a 404: a plain miss
    _plant(nginx_dav, _record(PARTS, ENGINE), KEY, ENGINE)
    remote.forget_remotes()
    reader = Store(tmp_path / "store", "read", remote=nginx_dav.url)
    assert reader.get(KEY) is None
    assert reader.notes == [
        f"the remote store {nginx_dav.url} holds {KEY[:12]}, but the local store is read-only (mode = read) and "
        "cannot keep it to restore from"
    ]
    assert gets(nginx_dav, "cas") == [] and list((store.root / "entries").iterdir()) == []
    # and a read-only store never sends anything
    entry = forged_entry(Store(tmp_path / "local"), tmp_path, "local")
    remote.push_entry(Store(tmp_path / "local", "read", remote=nginx_dav.url), entry)
    assert puts(nginx_dav, "cas") == puts(nginx_dav, "ac") == []


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("https://builder:s3cret@cache.example/trtls", "must not hold a user name or password"),
        ("ftp://cache.example/trtls", "must be an http:// or https:// URL"),
        ("http:///trtls", "names no host"),
        ("https://cache.example/trtls?token=1", "must not have a query or a fragment"),
    ],
)
def test_a_remote_url_that_cannot_be_used_is_a_located_error(tmp_path: Path, url: str, said: str) -> None:
    (tmp_path / "m.onnx").write_bytes(b"onnx")
    text = f'[engines.demo]\nonnx = "m.onnx"\noutput = "out/demo.engine"\n\n[store]\nremote = "{url}"\n'
    (tmp_path / "trtls.toml").write_text(text)
    loaded = load_recipe(tmp_path / "trtls.toml")
    (finding,) = loaded.errors
    assert said in finding.message and "s3cret" not in finding.message  # a secret is never echoed
    assert loaded.source_map.range(finding.path, finding.on_value).human() == "6:10", finding


def test_an_unusable_remote_from_the_environment_is_a_note(tmp_path: Path) -> None:
    store = Store(tmp_path / "store", remote="ftp://cache.example/trtls")
    store.check()
    assert store.get(KEY) is None
    (note,) = store.notes
    assert note == "the remote store ftp://cache.example/trtls is not used: it must be an http:// or https:// URL"


def test_a_redirect_to_another_server_or_an_error_is_a_note_not_a_crash(tmp_path: Path) -> None:
    extra = (
        "location /elsewhere/ { return 302 http://localhost:9/cache$request_uri; }\n"
        "        location /broken/ { return 503; }\n"
        "        location /same/ { rewrite ^/same/(.*)$ /cache/$1 redirect; }"
    )
    server = start_dav(tmp_path / "nginx", extra)
    try:
        _plant(server, _record(PARTS, ENGINE), KEY, ENGINE)
        base = server.url.removesuffix("/cache")
        for path, said in [("/elsewhere", "answered 302"), ("/broken", "answered 503")]:
            store = Store(tmp_path / f"store{path}", remote=base + path)
            store.check()
            assert store.get(KEY) is None
            (note,) = store.notes
            assert note.startswith(f"the remote store {base + path} was not used: GET /") and said in note, note
        assert "localhost:9" not in server.access_log()  # never followed (nothing listens there anyway)
        same = Store(tmp_path / "store-same", remote=base + "/same")  # a redirect on the same server is followed
        same.check()
        entry = same.get(KEY)
        assert entry is not None and entry.engine.read_bytes() == ENGINE
    finally:
        server.stop()
