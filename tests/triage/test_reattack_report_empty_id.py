"""`trtls report --reduction ""` (a script whose variable came out empty) asked for a reduction and got the latest
build's page, exit 0; `--route ""` the same. An empty id is no such reduction or route: exit 2, said, nothing
written."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

QUICKSTART = Path(__file__).resolve().parents[2] / "samples" / "quickstart"


def test_an_empty_reduction_or_route_id_is_refused_not_the_latest_build(tmp_path: Path) -> None:
    ws = tmp_path / "q"
    ws.mkdir()
    (ws / "models").mkdir()
    (ws / "models" / "demo.onnx").write_bytes((QUICKSTART / "models" / "demo.onnx").read_bytes())
    recipe = (QUICKSTART / "trtls.toml").read_text()
    (ws / "trtls.toml").write_text(recipe[: recipe.index("[engines.large]")])
    built = subprocess.run([sys.executable, "-m", "trtls", "build", str(ws), "--engine", "demo"], capture_output=True)
    assert built.returncode == 0, built.stderr[-1500:]
    for option, words in (("--reduction", "no reduction ''"), ("--route", "route ''")):
        cmd = [sys.executable, "-m", "trtls", "report", option, "", "--recipe", str(ws), "-o", "-"]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        assert done.returncode == 2 and words in done.stderr, (option, done.returncode, done.stderr[-800:])
        assert "<html" not in done.stdout, "no build's page for an empty id"
