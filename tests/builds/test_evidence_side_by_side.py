"""A build's three evidence records (summary.json, tree.json, environment.json) are written side by side after the
worker ends (issue 31: each is an atomic, fsynced write on the way to the build's answer, and fsyncs issued together are
committed together), and they are the records the build's summary says, with running.json removed after them.

A real build; the real `write_record`, wrapped to meet the other two writes first: written one after the other, the
first write would wait for the others alone and the barrier would break."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from trtls.builds.supervisor import build_end

from .helpers import run_build


async def test_the_three_evidence_records_are_written_side_by_side(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    together = threading.Barrier(3, timeout=120)  # a bound for a broken run, not a measured time
    written: list[str] = []
    real = build_end.write_record

    def write_record(path: Path, text: str) -> None:
        together.wait()
        real(path, text)
        written.append(path.name)

    monkeypatch.setattr(build_end, "write_record", write_record)
    _, build = await run_build(workspace)
    summary = await build.wait()
    assert summary.outcome == "built" and "evidenceError" not in summary.model_fields_set
    assert sorted(written) == ["environment.json", "summary.json", "tree.json"]
    on_disk = json.loads((build.evidence_dir / "summary.json").read_text())
    assert on_disk["buildId"] == build.id and on_disk["outcome"] == "built"
    assert json.loads((build.evidence_dir / "tree.json").read_text()) == on_disk["phaseTree"]
    assert json.loads((build.evidence_dir / "environment.json").read_text()) == json.loads(
        json.dumps(build.environment.record(), default=str)
    )
    assert not (build.evidence_dir / "running.json").exists()
