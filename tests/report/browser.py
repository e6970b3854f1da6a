"""A real headless Chromium (Debian's `chromium`, installed by .ci/run) for the report tests, and a PNG reader
(stdlib only) to tell a drawn screenshot from a blank one."""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import tempfile
import zlib
from pathlib import Path

import pytest

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
    "--hide-scrollbars",
]


def chromium() -> str:
    exe = shutil.which("chromium")
    if exe is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is missing: .ci/run installs it (apt-get install chromium)")
        pytest.skip("chromium is not installed (apt-get install chromium)")
    return exe


def _run(args: list[str]) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory(prefix="trtls-chromium-") as profile:
        return subprocess.run(
            [chromium(), *FLAGS, f"--user-data-dir={profile}", *args], capture_output=True, text=True, timeout=120
        )


def dump_dom(page: Path) -> str:
    """The DOM after Chromium loaded and laid out the page (what a person's browser shows)."""
    r = _run(["--dump-dom", page.resolve().as_uri()])
    assert r.returncode == 0 and "<html" in r.stdout, r.stderr[-2000:]
    return r.stdout


def screenshot(page: Path, out: Path, size: str = "1280,1100") -> Path:
    r = _run([f"--window-size={size}", f"--screenshot={out}", page.resolve().as_uri()])
    assert r.returncode == 0 and out.is_file(), r.stderr[-2000:]
    return out


def png_pixels(path: Path) -> tuple[int, int, list[bytes]]:
    """(width, height, rows of RGB(A) bytes) of an 8-bit RGB or RGBA PNG, unfiltered."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, width = 8, b"", 0
    height = bpp = 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos : pos + 8])
        chunk = data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour = struct.unpack(">IIBB", chunk[:10])
            assert depth == 8 and colour in (2, 6), (depth, colour)
            bpp = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += chunk
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows: list[bytes] = []
    prev = bytearray(stride)
    for y in range(height):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return width, height, rows


def drawn_fraction(path: Path) -> tuple[float, int]:
    """Share of pixels that differ from the top-left (background) pixel, and the number of distinct colours."""
    width, height, rows = png_pixels(path)
    bpp = len(rows[0]) // width
    background = rows[0][:3]
    colours: set[bytes] = set()
    differ = 0
    for row in rows[::2]:
        for x in range(0, width * bpp, bpp * 2):
            px = row[x : x + 3]
            colours.add(px)
            differ += px != background
    sampled = len(rows[::2]) * len(range(0, width * bpp, bpp * 2))
    return differ / sampled, len(colours)
