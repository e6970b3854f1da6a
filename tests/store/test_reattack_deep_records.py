"""A build's record under `.trtls/` nested deeper than Python's JSON parser's stack (`[` × 3,000: a few KB, far under
every record's size bound), planted or damaged by another user, is a bad record like one that is not JSON. Before,
`json.loads` raised RecursionError (not a ValueError) out of each reader: `trtls build` on the fast path's memo
(`engines/<engine>.hit.json`), the known-good record (`engines/<engine>.json`) or the ONNX external-data index,
`trtls engines`, `trtls rollback`, `trtls report` and `trtls trace` on a run's `events.jsonl`, and `trtls report` /
`trtls gc` on its `summary.json` — each a traceback. The door's `parse_json` (trtls.fs) is the one rule now. Real
`trtls` processes on a real build's workspace (the store's seed)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.store.helpers import built_once

DEEP = "[" * 3000 + "]" * 3000


@pytest.fixture(scope="module")
def built(seeded: tuple[Path, dict], tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The seed's workspace built once more into a store of its own: every record a build leaves, its run id."""
    return built_once(seeded[0], tmp_path_factory.mktemp("deep"))


CASES = [
    (".trtls/engines/demo.hit.json", ["build", ".", "--engine", "demo"], (0,)),
    (".trtls/engines/demo.json", ["build", ".", "--engine", "demo"], (0,)),
    (".trtls/onnx-external.json", ["build", ".", "--engine", "demo"], (0,)),
    (".trtls/engines/demo.json", ["engines", "demo"], (1,)),
    (".trtls/engines/demo.json", ["rollback", "demo"], (1,)),
    (".trtls/runs/{run}/events.jsonl", ["report", "{run}"], (0,)),
    (".trtls/runs/{run}/events.jsonl", ["trace", "{run}"], (0,)),
    (".trtls/runs/{run}/summary.json", ["report", "{run}"], (2,)),
    (".trtls/runs/{run}/summary.json", ["gc", "."], (0,)),
]


@pytest.mark.parametrize(("record", "command", "codes"), CASES, ids=[f"{c[1][0]}:{c[0]}" for c in CASES])
def test_a_record_nested_too_deeply_is_a_bad_record_not_a_traceback(
    built: tuple[Path, str], tmp_path: Path, record: str, command: list[str], codes: tuple[int, ...]
) -> None:
    ws = tmp_path / "ws"
    shutil.copytree(built[0], ws, symlinks=True)
    path = ws / record.format(run=built[1])
    assert path.is_file(), record
    path.write_text(DEEP)
    r = subprocess.run(
        [sys.executable, "-m", "trtls", *(c.format(run=built[1]) for c in command)],
        cwd=ws,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert "Traceback" not in r.stderr and "RecursionError" not in r.stderr, r.stderr[-2000:]
    assert r.returncode in codes, (r.returncode, r.stdout[-1000:], r.stderr[-1000:])
    if command[0] == "report" and record.endswith("summary.json"):  # said, with the record it could not read
        assert "summary.json: not valid JSON (nested deeper than the JSON parser can read)" in r.stderr, r.stderr
