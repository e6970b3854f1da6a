"""Two `trtls.findDivergence` of one engine side by side (the command sent twice at once): both convert the same
model with the same settings in the one server process. Their conversions once shared the temp folder
`.trtls/precision/.<key>.tmp-<pid>`; the second removed the first's half-written model, and one search ended
"failed: PrecisionFailed: FileNotFoundError …". Both end with the same verdict now, and no temp folder is left."""

from __future__ import annotations

import json
import time
from pathlib import Path

from tests.triage.diverge_model import RECIPE, write_model

from .raw_stdio import RawServer


def test_two_searches_of_one_engine_at_once_both_convert(tmp_path: Path) -> None:
    (tmp_path / "models").mkdir()
    write_model(tmp_path / "models" / "enc.onnx")
    (tmp_path / "trtls.toml").write_text(RECIPE)
    s = RawServer(cwd=tmp_path)
    try:
        s.initialize(tmp_path)
        uri = (tmp_path / "trtls.toml").as_uri()
        ids = [s.command("trtls.findDivergence", {"uri": uri, "engine": "enc"})["divergenceId"] for _ in range(2)]
        end = time.monotonic() + 400
        while time.monotonic() < end:
            rows = {r["buildId"]: r for r in s.command("trtls.listBuilds", {})["builds"]}
            if all(rows[i]["status"] not in ("starting", "running") for i in ids):
                break
            time.sleep(0.2)
    finally:
        s.close()
    for rid in ids:
        path = tmp_path / ".trtls" / "reduce" / rid / "divergence.json"
        assert path.is_file(), f"{rid} wrote no record: it failed ({s.stderr.decode(errors='replace')[-1500:]})"
        record = json.loads(path.read_text())
        assert record["firstDiverging"]["node"] == "proj_tiny", record["firstDiverging"]
    left = [p.name for p in (tmp_path / ".trtls" / "precision").iterdir() if ".tmp-" in p.name]
    assert left == [], left
