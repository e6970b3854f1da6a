"""The HTTP side of the remote engine store (store/remote.py): requests with bounded waits, cut at once when the build
they serve is stopped, redirects kept on the remote's scheme, host and port, what a remote that could not be reached
is remembered as, and the notes a build shows. Nothing here raises anything but RemoteError (an OSError is the local
side's)."""

from __future__ import annotations

import contextlib
import errno
import http.client
import os
import re
import selectors
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import urlsplit

from trtls.core.store_table import remote_problem
from trtls.core.terminal_text import terminal_safe
from trtls.core.validation import shown_value

if TYPE_CHECKING:
    from trtls.core.cancel import CancelToken
    from trtls.store.folder import StoreFolder

TIMEOUT_S = 5.0  # connecting, and each wait for bytes from the socket
PUT_TIMEOUT_S = 60.0  # a PUT's answer comes when the server has stored (perhaps hashed) the whole engine
RECORD_WAIT_S = 30.0  # a record (at most RECORD_LIMIT bytes) trickled slower than this is given up
MIN_RATE = 4 * 1024 * 1024  # bytes/s: an engine slower than this (after ENGINE_GRACE_S) is given up
ENGINE_GRACE_S = 30.0
_DIGITS = re.compile(r"[0-9]{1,19}")
DOWN_MEMORY_S = 60.0  # a remote that could not be reached is not asked again for this long

down: dict[str, float] = {}  # remote → until when it is taken as unreachable


class RemoteError(Exception):
    """What went wrong with the remote, said in one short line (the note)."""


class Unusable(RemoteError):
    """The remote sent something that is not a valid entry for the key: never asked for that key again here."""


class Stopped(RemoteError):
    """The build the request served was stopped (its cancel state set: a Ctrl-C, the editor's Stop, a SIGTERM) and
    the request's socket cut: nothing it brought is kept, and nothing is remembered of the remote (it did no wrong)."""

    def __init__(self) -> None:
        super().__init__("the build was stopped while it was asked")


def base(store: StoreFolder) -> str | None:
    """The remote's URL without a trailing slash, or None (a URL that cannot be a remote is said once)."""
    url = store.remote_url
    if url and (why := remote_problem(url)) is not None:
        note(store, f"the remote store {shown(url)} is not used: it {why}")
    return usable(url)


def usable(url: str | None) -> str | None:
    """`url` without a trailing slash when it can be a remote store's, else None (`base` says why, once)."""
    return url.strip().rstrip("/") if url and remote_problem(url) is None else None


def join(url: str, area: str, name: str) -> str:
    return f"{url}/{area}/{name}"


class _SameOrigin(urllib.request.HTTPRedirectHandler):
    """A redirect is followed only to the same scheme, host and port (never to another server)."""

    def redirect_request(self, req: Any, fp: Any, code: int, msg: str, headers: Any, newurl: str) -> Any:
        old, new = urlsplit(req.full_url), urlsplit(newurl)
        if (old.scheme, old.hostname, old.port) != (new.scheme, new.hostname, new.port):
            raise urllib.error.HTTPError(newurl, code, f"a redirect to another server ({new.netloc})", headers, fp)
        return super().redirect_request(req, fp, code, msg, headers, newurl)


class _Deadline:
    """A whole request's bound: its socket is shut down when the bound passes, whatever the request is waiting for —
    a status line or headers trickled a byte every few seconds (each wait under TIMEOUT_S) held a build, and its
    Ctrl-C, for as long as the server liked; a body read in blocks the same. The same cut comes at once when `stop`,
    the cancel state of the build the request serves, is set: a Ctrl-C while an engine downloaded (the lookup's thread
    reading on) held the command until the download's own bound had passed, and kept an engine that came meanwhile.
    A connect in progress is cut by the stop too (`connect`): a remote that took no connection held a Ctrl-C for the
    whole connect timeout. Its listener on `stop` lives as long as the request (`disarm` takes it off): one cancel
    state serves many requests — the editor's lookups, a matrix — and kept one listener for each."""

    def __init__(self, seconds: float, stop: CancelToken | None = None) -> None:
        self.seconds = seconds
        self.stop = stop
        self.timers: list[threading.Timer] = []
        self.socks: list[Any] = []  # the connections armed (or connecting) and not yet disarmed: what a cut shuts down
        self.passed = threading.Event()  # the socket was cut: what was read is not the answer
        self.stopped = False  # it was cut by the build's stop, not by the bound (set before `passed`)
        if stop is not None:
            stop.on_request(self._stopped)  # at once when the build was stopped already

    def connect(self, address: tuple[str, int], timeout: float, source_address: Any = None) -> socket.socket:
        """`socket.create_connection`, each address's connect cut at once by a stop: the socket is among `socks`
        before its connect starts, and a shut down socket whose connect is in progress returns from the wait at
        once. The stop is looked at after the connect began, so one that came just before is not missed either."""
        host, port = address
        last: OSError = OSError(f"getaddrinfo returns nothing for {host}")
        for family, kind, proto, _, where in socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM):
            sock = socket.socket(family, kind, proto)
            self.socks.append(sock)
            try:
                if source_address:
                    sock.bind(source_address)
                sock.setblocking(False)
                code = sock.connect_ex(where)
                if code in (errno.EINPROGRESS, errno.EWOULDBLOCK, errno.EAGAIN) and not self.stopped:
                    with selectors.DefaultSelector() as waiting:
                        waiting.register(sock, selectors.EVENT_WRITE)
                        if not waiting.select(timeout):
                            raise TimeoutError("timed out")  # socket.create_connection's own words
                    code = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                if self.stopped:
                    raise ConnectionAbortedError(errno.ECONNABORTED, "the build was stopped")
                if code:
                    raise OSError(code, os.strerror(code))
                sock.settimeout(timeout)
                return sock
            except OSError as exc:
                self.socks.remove(sock)
                sock.close()
                last = exc
        raise last

    def arm(self, sock: Any) -> None:
        if sock not in self.socks:
            self.socks.append(sock)  # an HTTPS connection's socket wraps the one that connected
        timer = threading.Timer(self.seconds, self.cut)
        timer.daemon = True
        timer.start()
        self.timers.append(timer)

    def _stopped(self, source: str) -> None:
        self.stopped = True
        self.cut()

    def cut(self) -> None:
        """Shut the request's sockets down (from the timer's thread, or the one that set the cancel state): a read
        waiting on them, or a connect, returns at once."""
        self.passed.set()
        for sock in list(self.socks):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def disarm(self) -> None:
        """The request is over (answered, failed or stopped): no timer, no socket, no listener on the cancel state
        is left of it. Called once or more."""
        for timer in self.timers:
            timer.cancel()
        self.socks.clear()
        if self.stop is not None:
            self.stop.off_request(self._stopped)


def _handlers(deadline: _Deadline) -> list[Any]:
    """urllib's HTTP and HTTPS handlers, their connections connecting through `deadline` (a stop cuts a connect) and
    arming it once connected."""

    class Http(http.client.HTTPConnection):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._create_connection = deadline.connect

        def connect(self) -> None:
            super().connect()
            deadline.arm(self.sock)

    class Https(http.client.HTTPSConnection):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._create_connection = deadline.connect

        def connect(self) -> None:
            super().connect()
            deadline.arm(self.sock)

    class HttpHandler(urllib.request.HTTPHandler):
        def http_open(self, req: Any) -> Any:
            return self.do_open(Http, req)

    class HttpsHandler(urllib.request.HTTPSHandler):
        def https_open(self, req: Any) -> Any:
            return self.do_open(Https, req, context=getattr(self, "_context", None))  # as urllib's own, verified

    return [_SameOrigin, HttpHandler, HttpsHandler]


def _send(deadline: _Deadline, req: Any, timeout: float) -> Any:
    """`req` sent by an opener whose connections arm `deadline`: an HTTP request, not a file (the one-door test reads
    any `x.open(...)` as a file's open, so the opener's is named `send`)."""
    send = urllib.request.build_opener(*_handlers(deadline)).open
    return send(req, timeout=timeout)


def cut(response: Any) -> bool:
    """Whether the request's bound passed, or its build was stopped, while `response` was read (its socket was cut: a
    short read, not the end)."""
    deadline = getattr(response, "deadline", None)
    return isinstance(deadline, _Deadline) and deadline.passed.is_set()


def stopped(response: Any) -> bool:
    """Whether `response`'s socket was cut because the build it served was stopped (`Stopped`, not too slow)."""
    deadline = getattr(response, "deadline", None)
    return isinstance(deadline, _Deadline) and deadline.stopped


def cut_error(response: Any, slow: str) -> RemoteError:
    """What a cut answer was: the build's stop, or the bound passing (`slow` says which bound)."""
    return Stopped() if stopped(response) else RemoteError(slow)


def content_length(headers: Any) -> int | None:
    """The Content-Length a response says, when it is one (ASCII digits only: `str.isdigit` takes '²', which `int`
    does not — a traceback before); None when it says none or something else."""
    length = headers.get("Content-Length")
    return int(length) if isinstance(length, str) and _DIGITS.fullmatch(length) else None


@contextlib.contextmanager
def request(
    url: str, method: str, target: str, whole: float | None = None, stop: CancelToken | None = None
) -> Iterator[Any]:
    """The open response of a GET/HEAD (None on a 404), the whole request — headers and the body read in the block —
    bounded by `whole` seconds, and cut at once when `stop` is set (`Stopped`; not sent at all when it is set
    already). Any other answer, or none, is a RemoteError; a remote that cannot be reached is remembered as down."""
    if stop is not None and stop.is_set:
        raise Stopped()
    whole = RECORD_WAIT_S if whole is None else whole  # read now, not when the module was (a test scales it down)
    deadline = _Deadline(whole, stop)
    try:  # whatever ends the request, its deadline is disarmed (its listener taken off `stop`)
        try:
            response = _send(deadline, urllib.request.Request(target, method=method), TIMEOUT_S)
        except urllib.error.HTTPError as exc:
            deadline.disarm()  # a 404's block is the caller's: a stop meanwhile is not this request's
            exc.close()
            if exc.code == 404:
                yield None
                return
            raise RemoteError(f"{method} {path(target)} answered {exc.code} {terminal_safe(exc.reason)}") from None
        except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError) as exc:
            if deadline.stopped:
                raise Stopped() from None  # cut by the build's stop: the remote is not taken as down
            raise unreachable(url, exc) from None
        response.deadline = deadline  # read_all and the engine's reader say a cut answer is one that came too slowly
        with response:
            if deadline.passed.is_set():  # the headers were still trickling in when the bound passed (or a stop came)
                raise cut_error(response, f"its answer came too slowly (more than {whole:g} s)")
            yield response
    finally:
        deadline.disarm()


def request_status(
    url: str,
    method: str,
    target: str,
    body: Any = None,
    size: int = 0,
    timeout: float = TIMEOUT_S,
    stop: CancelToken | None = None,
) -> int:
    """The status a PUT or DELETE was answered with. Cut at once when `stop` is set, as a GET is (`Stopped`; not sent
    at all when it is set already): an engine's upload while the body is still going out or its answer awaited."""
    if stop is not None and stop.is_set:
        raise Stopped()
    headers = {"Content-Length": str(size), "Content-Type": "application/octet-stream"} if body is not None else {}
    req = urllib.request.Request(target, data=cast(Any, body), method=method, headers=headers)
    deadline = _Deadline(timeout + size / MIN_RATE, stop)
    try:
        with _send(deadline, req, timeout) as response:
            if deadline.stopped:  # cut as its answer came: what the remote made of a cut body is not ours to trust
                raise Stopped()
            return int(response.status)
    except urllib.error.HTTPError as exc:
        exc.close()
        if deadline.stopped:
            raise Stopped() from None
        return int(exc.code)
    except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError) as exc:
        if deadline.stopped:
            raise Stopped() from None  # cut by the build's stop: the remote is not taken as down
        raise unreachable(url, exc) from None
    finally:
        deadline.disarm()


def head(url: str, target: str, stop: CancelToken | None = None) -> int | None:
    """The Content-Length of what the remote holds at `target` (-1 when it does not say), or None (a 404)."""
    with request(url, "HEAD", target, stop=stop) as response:
        if response is None:
            return None
        length = content_length(response.headers)
        return -1 if length is None else length


def read_all(response: Any, limit: int) -> bytes:
    """A record's bytes, given up past `limit` bytes or when they trickle in for longer than RECORD_WAIT_S (each
    wait for bytes is bounded by TIMEOUT_S already; this bounds them all)."""
    deadline = time.monotonic() + RECORD_WAIT_S
    data = bytearray()
    try:
        while len(data) <= limit:
            if time.monotonic() > deadline:
                raise RemoteError(f"its record came too slowly (more than {RECORD_WAIT_S:g} s)")
            block = response.read1(min(1 << 16, limit + 1 - len(data)))
            if not block:
                break
            data += block
    except (OSError, http.client.HTTPException) as exc:
        if cut(response):
            raise cut_error(response, f"its record came too slowly (more than {RECORD_WAIT_S:g} s)") from None
        raise RemoteError(f"its answer could not be read: {type(exc).__name__} {exc}") from None
    if cut(response):
        raise cut_error(response, f"its record came too slowly (more than {RECORD_WAIT_S:g} s)")
    if len(data) > limit:
        raise Unusable(f"its record is more than {limit} bytes")
    return bytes(data)


def unreachable(url: str, exc: BaseException) -> RemoteError:
    reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
    why = getattr(reason, "strerror", None) or str(reason) or type(reason).__name__
    down[url] = time.monotonic() + DOWN_MEMORY_S
    return RemoteError(f"it could not be reached ({terminal_safe(why)})")


def remembered(memory: dict[Any, float], what: Any) -> bool:
    until = memory.get(what)
    if until is None:
        return False
    if time.monotonic() < until:
        return True
    memory.pop(what, None)
    return False


def note(store: StoreFolder, line: str) -> None:
    if line not in store.notes:
        store.notes.append(line)


def shown(url: str) -> str:
    return terminal_safe(shown_value(url.strip().rstrip("/")), keep_newlines=False)


def path(target: str) -> str:
    return terminal_safe(urlsplit(target).path, keep_newlines=False)
