"""`await build.wait()` and `await matrix.wait()` answer the evidence record as its model (issue 28, item 5): a
`core.summary_record.Summary` a caller reads by attribute (`summary.outcome`), whose `record()` is the JSON written to
summary.json, byte for byte. One real TensorRT-RTX build of the quickstart's `demo`, as the one cell of a matrix, so
both waits are met by one build."""

from __future__ import annotations

import json
from pathlib import Path

from trtls.builds.supervisor.matrix import plan, start_matrix
from trtls.builds.supervisor.supervisor import Supervisor
from trtls.core.summary_record import MatrixCell, Summary

from .helpers import loaded


async def test_wait_answers_the_summary_model_of_what_was_written(workspace: Path) -> None:
    rec = loaded(workspace)
    mb = start_matrix(Supervisor(), rec, plan(rec, ["demo"], False, {}), "demo")
    matrix = await mb.wait()
    (build,) = mb.cells
    summary = await build.wait()  # the build is over: answered at once, the same record

    assert isinstance(summary, Summary) and summary.outcome == "built", summary.error
    assert summary.buildId == build.id and summary.engine == "demo" and summary.parentId == mb.id
    assert summary.environment is not None and summary.environment.module == "tensorrt_rtx"
    assert summary.engineArtifact is not None and Path(summary.engineArtifact["path"]).is_file()
    assert summary.missing_runbook_fields() == []
    text = (build.evidence_dir / "summary.json").read_text()
    assert json.dumps(summary.record(), indent=2, default=str) == text, "the record answered is the file written"

    assert isinstance(matrix, Summary) and matrix is mb.record and matrix.kind == "matrix"
    assert matrix.outcome == "built" and matrix.buildId == mb.id
    (cell,) = matrix.cells
    assert isinstance(cell, MatrixCell) and cell.buildId == build.id and cell.outcome == "built"
    assert json.dumps(matrix.record(), indent=2) == (mb.evidence_dir / "summary.json").read_text()
