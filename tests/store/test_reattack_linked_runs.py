"""The readers of a build's record that did not bound it to its project now do (the re-attack of 2026-12-04,
evening): with `.trtls/runs` swapped for a link to another folder holding a forged record of a real build, the
report's loader, the capability lens's recorded answer and the retention's listing refuse or skip it, where each read
the outside record before. Real files and a real symlink; the record is a real `trtls build`'s summary."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trtls.builds.supervisor.retention import scan_runs
from trtls.report.capability_lens import recorded_answer
from trtls.report.evidence import EvidenceError, load_summary


def _linked_runs(seeded: tuple[Path, dict], tmp_path: Path) -> tuple[Path, Path, str]:
    summary = dict(seeded[1])
    run_id = str(summary["buildId"])
    project, outside = tmp_path / "project", tmp_path / "outside"
    project.mkdir()
    (project / "trtls.toml").write_text("")
    record = outside / "runs" / run_id / "summary.json"
    record.parent.mkdir(parents=True)
    record.write_text(json.dumps({**summary, "message": "forged outside the project"}))
    (project / ".trtls").mkdir()
    (project / ".trtls" / "runs").symlink_to(outside / "runs")
    return project, record, run_id


def test_a_record_behind_a_linked_runs_folder_is_not_read(seeded: tuple[Path, dict], tmp_path: Path) -> None:
    project, outside_record, run_id = _linked_runs(seeded, tmp_path)
    through_link = project / ".trtls" / "runs" / run_id / "summary.json"
    with pytest.raises(EvidenceError, match="leads out of"):
        load_summary(through_link)
    assert recorded_answer(project / "trtls.toml", run_id) is None
    listed = scan_runs(project / ".trtls" / "runs", read_summaries=True)
    assert all(run.summary is None for run in listed), "the outside record was read as this project's"
    assert load_summary(outside_record).message == "forged outside the project"  # read where it lies, it is a record
