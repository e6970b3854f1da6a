"""A build's time that no calendar holds, in a record another user damaged (`"startedAt": 1e300`, `-1e18`, `NaN`):
`time.localtime` raised OverflowError, OSError or ValueError out of `trtls report` (the page's dates) and `trtls
engines` (the known-good list; text raised TypeError there too). One formatter (core.display.local_time) says "an
unknown time" / "—" instead. Real `trtls` processes on a real build's records (the store's seed)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.store.helpers import built_once


@pytest.fixture(scope="module")
def built(seeded: tuple[Path, dict], tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    return built_once(seeded[0], tmp_path_factory.mktemp("times"))


def _trtls(ws: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "trtls", *args], cwd=ws, capture_output=True, text=True, timeout=300)


def _plant(path: Path, value: object, builds: bool = False) -> None:
    data = json.loads(path.read_text())
    for record in data["builds"] if builds else [data]:
        record["startedAt"] = value
    path.write_text(json.dumps(data))


@pytest.mark.parametrize("value", [1e300, -1e18, float("nan"), "yesterday"])
def test_a_time_no_calendar_holds_is_an_unknown_time_not_a_traceback(
    built: tuple[Path, str], tmp_path: Path, value: object
) -> None:
    ws = tmp_path / "ws"
    shutil.copytree(built[0], ws, symlinks=True)
    _plant(ws / ".trtls" / "engines" / "demo.json", value, builds=True)
    r = _trtls(ws, "engines", "demo")
    assert "Traceback" not in r.stderr and r.returncode == 0, r.stderr[-2000:]
    assert "an unknown time" in r.stdout, r.stdout
    if isinstance(value, float):  # a summary whose startedAt is text is refused by its schema (exit 2), said
        _plant(ws / ".trtls" / "runs" / built[1] / "summary.json", value)
        r = _trtls(ws, "report", built[1], "-o", str(tmp_path / "page.html"))
        assert "Traceback" not in r.stderr and r.returncode == 0, r.stderr[-2000:]
        assert (tmp_path / "page.html").is_file()
