"""A real nginx WebDAV server for the remote-store tests: Debian's nginx (its http_dav_module), started on a free
loopback port with a temporary document root that takes PUT and DELETE (`create_full_put_path`, no body limit),
its logs and pid file beside it, stopped when the test ends.

Skipped when nginx is not installed, unless TRTLS_REQUIRE_REMOTE is set (.ci/run sets it: there a missing nginx is a
failure, as .ci/setup installs it)."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

CONFIG = """
worker_processes 1;
pid {dir}/nginx.pid;
error_log {dir}/error.log info;
{user}
events {{ worker_connections 64; }}
http {{
    access_log {dir}/access.log;
    client_body_temp_path {dir}/body;
    proxy_temp_path {dir}/proxy;
    fastcgi_temp_path {dir}/fastcgi;
    uwsgi_temp_path {dir}/uwsgi;
    scgi_temp_path {dir}/scgi;
    server {{
        listen 127.0.0.1:{port};
        root {root};
        dav_methods PUT DELETE MKCOL;
        create_full_put_path on;
        client_max_body_size 0;
        {extra}
    }}
}}
"""


def nginx_binary() -> str | None:
    return shutil.which("nginx") or next((p for p in ("/usr/sbin/nginx",) if os.access(p, os.X_OK)), None)


def free_port() -> int:
    """A loopback port nothing listens on now (nginx binds it next; a lost race is retried)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class DavServer:
    url: str  # http://127.0.0.1:<port>/cache (no trailing slash)
    root: Path  # what the server stores: <root>/cache/ac/<key>, <root>/cache/cas/<sha256>
    folder: Path  # its config, logs and pid file
    process: subprocess.Popen[bytes]
    settles: int = 0

    @property
    def files(self) -> Path:
        return self.root / "cache"

    def access_log(self) -> str:
        """The access log once every request answered so far is in it: nginx writes a request's line after it has
        sent the answer, so a client can read an answer before its line is there. One worker logs in order: when a
        last request's own line is there, so are the lines of every request answered before it."""
        self.settles += 1
        marker = f"/settle-{self.settles}-{time.monotonic_ns()}"
        with contextlib.suppress(urllib.error.HTTPError):
            urllib.request.urlopen(self.url.removesuffix("/cache") + marker, timeout=10).close()
        path = self.folder / "access.log"
        deadline = time.monotonic() + 30
        while marker not in (text := path.read_text() if path.exists() else ""):
            assert time.monotonic() < deadline, f"nginx never logged {marker}"
            time.sleep(0.01)
        return text

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)


def start_dav(folder: Path, extra: str = "") -> DavServer:
    """`extra`: more of the server block (a location that redirects or fails, for a test)."""
    binary = nginx_binary()
    if binary is None:
        if os.environ.get("TRTLS_REQUIRE_REMOTE"):
            pytest.fail("nginx is required here (TRTLS_REQUIRE_REMOTE is set) but was not found: run .ci/setup")
        pytest.skip("nginx is not installed (Debian: apt-get install nginx); .ci/run requires it")
    folder.mkdir(parents=True, exist_ok=True)
    root = folder / "root"
    (root / "cache").mkdir(parents=True, exist_ok=True)
    # as root, nginx's workers would run as `nobody`, who cannot write a test's temporary folder
    user = "user root;" if os.geteuid() == 0 else ""
    last = ""
    for _ in range(5):
        port = free_port()
        conf = folder / "nginx.conf"
        conf.write_text(CONFIG.format(dir=folder, root=root, port=port, user=user, extra=extra))
        proc = subprocess.Popen(
            [binary, "-p", str(folder), "-c", str(conf), "-e", str(folder / "error.log"), "-g", "daemon off;"],
            stdout=subprocess.DEVNULL,
            stderr=(folder / "stderr.log").open("ab"),
        )
        server = DavServer(f"http://127.0.0.1:{port}/cache", root, folder, proc)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2).close()
                return server
            except urllib.error.HTTPError:
                return server  # it answers (a 403/404 on the root is an answer)
            except OSError:
                time.sleep(0.05)
        server.stop()
        last = (folder / "stderr.log").read_text() + (folder / "error.log").read_text()
    pytest.fail(f"nginx did not start: {last}")


@pytest.fixture
def nginx_dav(tmp_path: Path) -> Iterator[DavServer]:
    """A running nginx WebDAV server (PUT, DELETE, MKCOL) on a free loopback port; stopped at teardown."""
    server = start_dav(tmp_path / "nginx")
    try:
        yield server
    finally:
        server.stop()
