"""The editor's Find the first diverging layer with `fix`, stopped while the first diverging node's exclusion was
being converted: no exclusion was measured, yet the TRT981 message said "no exclusion tried brought the outputs
within tolerance". It says the exclusion was not checked now."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from tests.triage.diverge_model import RECIPE, write_model

from .raw_stdio import RawServer


def test_a_fix_stopped_before_its_exclusion_was_measured_says_not_checked(tmp_path: Path) -> None:
    (tmp_path / "models").mkdir()
    write_model(tmp_path / "models" / "enc.onnx")
    (tmp_path / "trtls.toml").write_text(RECIPE)
    cmd = [sys.executable, "-m", "trtls", "reduce", str(tmp_path), "--engine", "enc", "--diverge"]
    assert subprocess.run(cmd, capture_output=True, timeout=600).returncode == 0  # round 1's conversion cached
    s = RawServer(cwd=tmp_path)
    try:
        s.initialize(tmp_path)
        uri = (tmp_path / "trtls.toml").as_uri()
        rid = s.command("trtls.findDivergence", {"uri": uri, "engine": "enc", "fix": True})["divergenceId"]
        stopped = False
        end = time.monotonic() + 300
        while time.monotonic() < end:
            row = next(r for r in s.command("trtls.listBuilds", {})["builds"] if r["buildId"] == rid)
            if row["status"] not in ("starting", "running"):
                break
            if "without proj_tiny" in (row.get("headline") or ""):  # round 2: the exclusion being converted
                stopped = s.command("trtls.cancelBuild", {"buildId": rid})["accepted"]
                break
            time.sleep(0.02)
        assert stopped, "the search was caught converting the exclusion"
        ends = lambda: [  # noqa: E731
            m["params"]["value"]
            for m in s.messages
            if m.get("method") == "$/progress" and m["params"]["value"].get("kind") == "end"
        ]
        while time.monotonic() < end and not ends():
            time.sleep(0.1)
    finally:
        s.close()
    (done,) = ends()
    assert done["outcome"] == "cancelled", done
    assert "no exclusion tried" not in done["message"], done["message"]
    assert "fixes it was not checked" in done["message"], done["message"]
