"""A remote engine store over plain HTTP: the layout of bazel-remote and of ccache's HTTP backend, served by any
server that stores what is PUT and gives it back by GET (nginx's WebDAV module, bazel-remote, an S3 gateway).

    <url>/ac/<key>       an entry's record: its entry.json bytes (the key, its parts, the engine's sha256 and size,
                         the producing build, the team's signature when the store is signed)
    <url>/cas/<sha256>   the engine's bytes, by content: keys whose engines are the same bytes share one blob

A local miss asks the remote (`Store.get` → `fetch_entry`): the record is checked as a local entry's is (format, key
= the key asked = the key of its parts, engine fields, the team's signature), the engine is streamed into the local
store's `tmp/` while hashed, and only bytes of the recorded sha256 and size become a local entry (renamed whole into
`entries/`, as a publish's). Everything after that — restore, verification, LRU — is the local store's. Every
publish is sent on (`Store.publish` → `push_entry`): the engine first, then the record, so a reader that finds the
record finds its blob.

Nothing raises: an unreachable remote, an error, a bad record or bytes make the lookup a miss with a note in
`store.notes` (the evidence carries it); a 404 is a plain miss. A remote that sent bad bytes for a key is not asked
for it again here, an unreachable one not for a minute. Redirects stay on the remote's host and port. A fetch is cut
at once when the build it serves is stopped (`store.stop`, its cancel state: a Ctrl-C): its temp folder is discarded,
nothing is kept or remembered. An upload is cut the same way and then sends no record. The HTTP side (bounded waits,
the cut, same-origin redirects, what a remote that could not be reached is remembered as) is store/remote_http.py."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import http.client
import os
import shutil
import time
from typing import TYPE_CHECKING, Any, BinaryIO, cast

from trtls import fs
from trtls.fs import Kind, parse_json, read_bytes, rename
from trtls.fs.store_root import shared_modes
from trtls.store.copying import EntryUnreadable, copy_hashing
from trtls.store.entry_record import ENTRY_FORMAT, RECORD_LIMIT, Entry
from trtls.store.folder import tmp_name
from trtls.store.key import is_key, key_of_parts
from trtls.store.layout import entry_folder
from trtls.store.remote_http import DOWN_MEMORY_S, ENGINE_GRACE_S, MIN_RATE, PUT_TIMEOUT_S, TIMEOUT_S, RemoteError
from trtls.store.remote_http import Stopped as _Stopped
from trtls.store.remote_http import Unusable as _Unusable
from trtls.store.remote_http import base as _base
from trtls.store.remote_http import content_length as _content_length
from trtls.store.remote_http import cut as _cut
from trtls.store.remote_http import down as _down
from trtls.store.remote_http import head as _head
from trtls.store.remote_http import join as _join
from trtls.store.remote_http import note as _note
from trtls.store.remote_http import path as _path
from trtls.store.remote_http import read_all as _read_all
from trtls.store.remote_http import remembered as _remembered
from trtls.store.remote_http import request as _request
from trtls.store.remote_http import request_status as _request_status
from trtls.store.remote_http import shown as _shown
from trtls.store.remote_http import stopped as _stopped
from trtls.store.signing import signed_by

__all__ = [
    "DOWN_MEMORY_S",
    "ENTRY_FORMAT",
    "RECORD_LIMIT",
    "TIMEOUT_S",
    "RemoteError",
    "fetch_entry",
    "push_entry",
    "remote_record",
]

if TYPE_CHECKING:
    from trtls.core.cancel import CancelToken
    from trtls.store.entries import Store
    from trtls.store.publishing import PublishingFolder

MISS_MEMORY_S = 10.0  # a 404 is remembered this long (a waiter polls the lookup every 0.1 s)

_refused: set[tuple[str, str]] = set()  # (remote, key): it sent a bad record or bad bytes for this key
_missed: dict[tuple[str, str], float] = {}  # (remote, key) → until when its 404 stands
_bad_blobs: set[tuple[str, str]] = set()  # (remote, sha256) whose bytes were not that sha256: a push rewrites them


def forget_remotes() -> None:
    """Forget what this process learnt about remotes (refused keys, misses, a remote that was down, bad blobs)."""
    for memory in (_refused, _missed, _down, _bad_blobs):
        memory.clear()


# -- fetching ------------------------------------------------------------------------------------------
def fetch_entry(store: Store, key: str) -> bool:
    """Bring `key` from the remote into the local store as a whole entry; False when the remote does not hold it
    (or cannot be reached, or sent something that is not the key's entry: said in `store.notes`). Never raises."""
    url = _base(store)
    if url is None or not is_key(key) or (url, key) in _refused or _remembered(_missed, (url, key)):
        return False
    if _remembered(_down, url):
        if not any(_shown(url) in n for n in store.notes):  # this build said so already: once is enough
            _note(store, f"the remote store {_shown(url)} was not asked: it could not be reached a moment ago")
        return False
    if store.mode != "read_write":
        return _read_only_miss(store, url, key)
    try:
        raw = _get_record(url, key, store)
        if raw is None:
            _missed[(url, key)] = time.monotonic() + MISS_MEMORY_S
            return False
        record = _checked_record(store, raw, key)
        _fetch_into_store(store, url, key, raw, record)
    except _Stopped as exc:  # the build was stopped: nothing kept, nothing learnt about the remote
        _note(store, f"the remote store {_shown(url)} was not used: {exc}")
        return False
    except _Unusable as exc:
        _refused.add((url, key))
        _note(store, f"the remote store {_shown(url)} is not used for {key[:12]}: {exc}")
        return False
    except RemoteError as exc:
        _note(store, f"the remote store {_shown(url)} was not used: {exc}")
        return False
    except OSError as exc:  # the local side: the store's tmp/ or entries/ could not be written
        _note(store, f"an engine of the remote store {_shown(url)} could not be kept here: {exc.strerror or exc}")
        return False
    _note(store, f"fetched from the remote store {_shown(url)}")
    return True


def remote_record(store: Store, key: str) -> dict[str, Any] | None:
    """The remote's record of `key`, checked as a fetch checks it (format, key, parts, engine, the team's
    signature), without its engine; None when the remote does not hold one, cannot be reached or sent something that
    is not the key's record (said in `store.notes`). A farm node asks it before serving its own copy of a key: the
    remote, not the node's folder, says what the key's engine is now (builds/farm/node_store.py). Never raises."""
    url = _base(store)
    if url is None or not is_key(key):
        return None
    try:
        raw = _get_record(url, key, store)
        return None if raw is None else _checked_record(store, raw, key)
    except _Unusable as exc:
        _note(store, f"the remote store {_shown(url)} is not used for {key[:12]}: {exc}")
    except RemoteError as exc:
        _note(store, f"the remote store {_shown(url)} was not used: {exc}")
    return None


def _read_only_miss(store: Store, url: str, key: str) -> bool:
    """A read-only local store keeps nothing, so a remote entry cannot become a local one to restore from: say so
    when the remote holds the key (a HEAD, no bytes moved), and build."""
    try:
        held = _head(url, _join(url, "ac", key), store.stop) is not None
    except RemoteError as exc:
        _note(store, f"the remote store {_shown(url)} was not used: {exc}")
        return False
    if held:
        _note(
            store,
            f"the remote store {_shown(url)} holds {key[:12]}, but the local store is read-only "
            "(mode = read) and cannot keep it to restore from",
        )
    else:
        _missed[(url, key)] = time.monotonic() + MISS_MEMORY_S
    return False


def _get_record(url: str, key: str, store: Store) -> bytes | None:
    """The record's bytes, or None on a 404."""
    with _request(url, "GET", _join(url, "ac", key), stop=store.stop) as response:
        if response is None:
            return None
        length = _content_length(response.headers)
        if length is not None and length > RECORD_LIMIT:
            raise _Unusable(f"its record is {length} bytes, more than a record holds ({RECORD_LIMIT})")
        raw = _read_all(response, RECORD_LIMIT)
    return raw


def _checked_record(store: Store, raw: bytes, key: str) -> dict[str, Any]:
    """The record, when it is an entry of `key` as a local one must be; _Unusable says what is wrong."""
    try:
        record = parse_json(raw)
    except (ValueError, RecursionError):
        raise _Unusable("its record is not JSON") from None
    if not isinstance(record, dict) or record.get("format") != ENTRY_FORMAT:
        raise _Unusable(f"its record is not a {ENTRY_FORMAT} record")
    if record.get("key") != key:
        raise _Unusable("its record is of another key")
    parts = record.get("parts")
    try:
        of_parts = key_of_parts(parts) if isinstance(parts, dict) else None
    except (TypeError, ValueError, RecursionError):
        of_parts = None
    if of_parts != key:
        raise _Unusable("its record's key does not match its parts")
    engine = record.get("engine")
    sha = engine.get("sha256") if isinstance(engine, dict) else None
    size = engine.get("size") if isinstance(engine, dict) else None
    if not (isinstance(sha, str) and is_key(sha) and type(size) is int and size >= 0):
        raise _Unusable("its record names no engine (sha256 and size)")
    try:
        secret = store.secret()
    except OSError as exc:
        raise RemoteError(f"the signing key cannot be used: {exc.strerror or exc}") from exc
    if secret is not None and not signed_by(record, secret):
        raise _Unusable("its record is not signed with the team's key")
    return record


def _fetch_into_store(store: Store, url: str, key: str, raw: bytes, record: dict[str, Any]) -> None:
    """Stream cas/<sha256> into `tmp/` while hashing it; only bytes of the recorded sha256 and size, with the record
    beside them, are renamed into `entries/<key>` (another process that did so first wins: its entry is whole too)."""
    sha, size = str(record["engine"]["sha256"]), int(record["engine"]["size"])
    room = _room(store)
    if size > room:  # judged before a byte comes: the remote's own claim was the only bound (100 MiB into 1 MiB)
        raise _Unusable(f"its engine would be {size:,} bytes, more than this store can take ({room:,})")
    file_mode = shared_modes(store.root)[1]
    tmp = store.root / "tmp" / tmp_name("fetch", key)
    fs.ensure_folder(tmp, within=store.root)
    store.fit(tmp, folder=True)
    try:
        whole = ENGINE_GRACE_S + size / MIN_RATE
        with _request(url, "GET", _join(url, "cas", sha), whole=whole, stop=store.stop) as response:
            if response is None:
                raise _Unusable(f"its record names the engine {sha[:12]}…, which it does not hold")
            length = _content_length(response.headers)
            if length is not None and length != size:
                raise _Unusable(f"its engine is {length} bytes, not the {size} its record says")
            try:
                with fs.atomic_writer(tmp / "engine", kind=Kind.store_entry, within=store.root, mode=file_mode) as dst:
                    got, n = copy_hashing(cast(BinaryIO, _Capped(response, size)), dst, "fetch")
                    if (got, n) != (sha, size):
                        raise _Unusable(
                            f"its engine's bytes are not the ones its record names ({got[:12]}…, {n} "
                            f"bytes ≠ {sha[:12]}…, {size} bytes)"
                        )
            except EntryUnreadable as exc:  # the remote's side of the copy (a write that failed is the local disk's)
                if _stopped(response):
                    raise _Stopped() from None  # its socket cut by the build's stop: what came is not the engine
                if isinstance(exc.__cause__, _TooLong):
                    raise _Unusable(f"its engine is longer than the {size} bytes its record says") from None
                raise RemoteError(f"its engine could not be read: {exc.__cause__ or exc}") from None
        fs.atomic_write_bytes(tmp / "entry.json", raw, kind=Kind.store_entry, within=store.root, mode=file_mode)
        try:
            rename(tmp, entry_folder(store.root, key), kind=Kind.store_entry, within=store.root, replace=False)
        except OSError as exc:
            if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY):
                raise  # EEXIST/ENOTEMPTY: another process fetched or published this key first
    except _Unusable:
        _bad_blobs.add((url, sha))  # whatever it holds under that name, the next push of those bytes rewrites it
        raise
    finally:
        if os.path.lexists(tmp):
            store.discard(tmp)
    with contextlib.suppress(OSError):
        store.evict(keep=key)


class _TooLong(OSError):
    pass


def _room(store: Store) -> int:
    """The most bytes one fetched engine may be: the store's size limit, and what its disk has free."""
    try:
        free = shutil.disk_usage(store.root).free
    except OSError:
        free = 0
    return min(v for v in (store.max_size, free) if v is not None)


class _Capped:
    """A response read no further than the size its record gives (and given up when it trickles): a server cannot
    fill the disk or hold a build forever."""

    def __init__(self, response: Any, size: int):
        self._response = response
        self._left = size
        self._start = time.monotonic()
        self._got = 0

    def fileno(self) -> int:
        return int(self._response.fileno())

    def _too_slow(self) -> bool:
        """Slower than MIN_RATE after the 30 s grace, judged as it comes — not only once the size's whole time has
        passed (a claimed 20 GiB trickled a byte at a time would have held a build for an hour and a half)."""
        late = time.monotonic() - self._start - ENGINE_GRACE_S
        return late > 0 and self._got < late * MIN_RATE

    def read(self, n: int = -1) -> bytes:
        if self._too_slow() or _cut(self._response):
            raise TimeoutError(errno.ETIMEDOUT, "the remote sent its engine too slowly")
        try:
            if self._left <= 0:
                if self._response.read(1):
                    raise _TooLong(errno.EFBIG, "longer than its record says")
                return b""
            # read1: what has come, at most a block — a body trickled a byte at a time is looked at between bytes,
            # not after a whole 1 MiB block has filled (the request's own deadline cuts its socket anyway)
            block = bytes(self._response.read1(min(n if n > 0 else self._left, self._left, 1 << 16)))
        except http.client.HTTPException as exc:  # a body cut short (IncompleteRead), a broken chunk
            raise ConnectionError(errno.ECONNRESET, f"the answer was cut short ({type(exc).__name__})") from None
        if _cut(self._response):  # the bound passed while it waited: what came is a cut answer, not the engine
            raise TimeoutError(errno.ETIMEDOUT, "the remote sent its engine too slowly")
        self._left -= len(block)
        self._got += len(block)
        return block


# -- pushing -------------------------------------------------------------------------------------------
def push_entry(store: PublishingFolder, entry: Entry) -> None:
    """Send a local entry to the remote (its engine first, unless the remote holds that blob already, then its
    record); a failure is a note. Only from a read-write store. Never raises. Cut at once when the build it serves
    is stopped (`store.stop`: a Ctrl-C while a large engine goes to a slow remote): the engine's PUT is cut mid-body
    (a WebDAV server keeps no part of it: nginx stores a PUT's body only once it came whole) and no record is sent
    for it; the local entry stands."""
    url = _base(store)
    if url is None or store.mode != "read_write":
        store.upload.skipped("no usable remote store" if url is None else "the store is read-only (mode = read)")
        return
    if _remembered(_down, url):
        why = f"the remote store {_shown(url)} could not be reached a moment ago"
        _note(store, f"the engine was not sent to the remote store {_shown(url)}: it could not be reached a moment ago")
        store.upload.skipped(why)
        return
    stop = store.stop
    store.upload.sending()
    try:
        record = read_bytes(entry.folder / "entry.json", limit=RECORD_LIMIT, follow=False)
        blob = _join(url, "cas", entry.sha256)
        if (url, entry.sha256) in _bad_blobs or _head(url, blob, stop) != entry.size:  # a bad blob is rewritten
            with fs.open_regular(entry.engine, limit=None, follow=False, expected=entry.size) as src:
                hashing = _Hashing(src)
                _put(url, blob, hashing, entry.size, stop)
            if hashing.sha.hexdigest() != entry.sha256:
                with contextlib.suppress(RemoteError):
                    _request_status(url, "DELETE", blob)
                raise RemoteError("the local entry's engine changed while it was sent; its record was not sent")
            _bad_blobs.discard((url, entry.sha256))
        _put(url, _join(url, "ac", entry.key), record, len(record), stop)  # never when the engine's PUT was cut
        _missed.pop((url, entry.key), None)  # this process just put it there
        store.upload.done("sent")
    except _Stopped:
        source = stop.source if stop is not None else None
        how = f" ({source})" if source else ""
        store.upload.stopped(source)
        _note(
            store,
            f"the engine was not sent to the remote store {_shown(url)}: its upload was stopped{how} and no record "
            "was sent; the engine is built and kept in the local store",
        )
    except RemoteError as exc:
        store.upload.done(f"not sent: {exc}")
        _note(store, f"the engine was not sent to the remote store {_shown(url)}: {exc}")
    except (OSError, ValueError) as exc:  # ValueError: an answer no code path expected; the build's records stand
        failed = getattr(exc, "strerror", None) or exc
        store.upload.done(f"not sent: {failed}")
        _note(store, f"the engine was not sent to the remote store {_shown(url)}: {failed}")


class _Hashing:
    """The engine file as a request body, hashed as it is sent (what reached the remote is what was hashed)."""

    def __init__(self, src: BinaryIO):
        self._src = src
        self.sha = hashlib.sha256()

    def read(self, n: int = -1) -> bytes:
        block = self._src.read(1 << 20)  # http.client asks for 8 KiB at a time; a larger block is sent whole
        self.sha.update(block)
        return block


def _put(url: str, target: str, body: bytes | _Hashing, size: int, stop: CancelToken | None) -> None:
    status = _request_status(url, "PUT", target, body, size, timeout=PUT_TIMEOUT_S, stop=stop)
    if status not in (200, 201, 204):
        raise RemoteError(f"PUT {_path(target)} answered {status}")
