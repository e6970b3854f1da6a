"""`trtls build --engine NAME` starts its worker before the command line imports its parser, the door's process rules or
the recipe's readers (builds/supervisor/worker_launch.py, issue 31): each module imported before the spawn delays the
worker's start, the build's critical path. A certain build (`--no-store`, `--rebuild`) starts it outright; one the
store may still serve starts it parked (tests/builds/test_worker_parked.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import trtls

SERVER = Path(trtls.__file__).resolve().parent.parent
LATER = ("argparse", "trtls.fs.kill", "trtls.builds.supervisor.spawn", "asyncio", "trtls.core.recipe_file")

DRIVER = """
import json, sys
from trtls.builds.supervisor import worker_launch
seen = []
def start_now(preload, parked=False):
    seen.append({"preload": preload, "parked": parked, "loaded": sorted(m for m in LATER if m in sys.modules)})
    raise KeyboardInterrupt  # no worker in this test: the person's Ctrl-C right at the spawn
worker_launch.start_now = start_now
from trtls.cli.entry import main
code = main(["build", sys.argv[1], "--engine", "demo", *sys.argv[2:]])
print(json.dumps({"code": code, "seen": seen}))
"""


def _entry(tmp_path: Path, *flags: str) -> dict:
    (tmp_path / "trtls.toml").write_text('[engines.demo]\nonnx = "m.onnx"\noutput = "demo.engine"\n')
    code = f"LATER = {LATER!r}\n{DRIVER}"
    env = {**os.environ, "PYTHONPATH": str(SERVER)}
    out = subprocess.run(
        [sys.executable, "-S", "-c", code, str(tmp_path), *flags],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=tmp_path,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_build_spawns_its_worker_before_argparse_and_the_door_load(tmp_path: Path) -> None:
    for flags in (["--no-store"], ["--rebuild"], [], ["--json"]):
        got = _entry(tmp_path, *flags)
        certain = bool(flags) and flags != ["--json"]
        assert got["seen"] == [{"preload": "auto", "parked": not certain, "loaded": []}], (flags, got)
        assert got["code"] == 130, got  # the Ctrl-C at the spawn is the person's stop, said as such
