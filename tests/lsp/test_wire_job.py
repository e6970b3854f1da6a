"""The worker's job is what trtls.core.worker_job.WorkerJob declares (extra="forbid"): the first stdin line a real
build's supervisor writes to its worker, recorded by a worker command that passes it on to the built-in worker (the
build still succeeds), and the jobs builds.supervisor.job.worker_job makes for the quickstart's engines, a matrix
cell's
overrides and injected faults. A key the job gains without a declaration, or loses, fails here; docs/protocol.md's
job table is generated from the same model (its `write_root` included)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from trtls.core.protocol import PROTOCOL_VERSION
from trtls.core.worker_job import WorkerJob

from ..builds.helpers import run_build

# A worker command (`[engines.NAME] worker`) that records the job line, then runs the built-in worker on it: the
# rest of its stdin (control lines) is forwarded, its stdout (the events) is the built-in worker's own.
RECORDER = """
import subprocess, sys, threading
job = sys.stdin.readline()
open(sys.argv[1], "w").write(job)
child = subprocess.Popen([sys.executable, "-m", "trtls.builds.worker"], stdin=subprocess.PIPE)
child.stdin.write(job.encode()); child.stdin.flush()
def forward():
    for line in sys.stdin:
        child.stdin.write(line.encode()); child.stdin.flush()
    child.stdin.close()
threading.Thread(target=forward, daemon=True).start()
sys.exit(child.wait())
"""


async def test_the_job_a_real_build_sends_is_the_declared_model(workspace: Path, tmp_path: Path) -> None:
    recorder, recorded = tmp_path / "recorder.py", tmp_path / "job.json"
    recorder.write_text(RECORDER)
    recipe = workspace / "trtls.toml"
    worker = json.dumps([sys.executable, str(recorder), str(recorded)])
    recipe.write_text(
        recipe.read_text().replace("[engines.demo.builder]", f"worker = {worker}\n\n[engines.demo.builder]")
    )

    _, build = await run_build(workspace)
    summary = await build.wait()

    assert summary.outcome == "built", summary.error
    sent = json.loads(recorded.read_text())
    job = WorkerJob.model_validate(sent)  # raises on a key the protocol does not declare, or one it lacks
    assert job.model_dump(mode="json", exclude_unset=True) == sent, "every key and value as sent"
    assert job.v == PROTOCOL_VERSION and job.build_id == build.id and job.engine == "demo"
    assert Path(job.write_root) == workspace.resolve() and Path(job.output).parent.parent == Path(job.write_root)
    assert job.timing_cache is not None and job.timing_cache.write_root == job.write_root


def test_the_jobs_worker_job_makes_are_the_declared_model(workspace: Path) -> None:
    from trtls.builds.supervisor.job import worker_job
    from trtls.core.recipe import load_recipe

    loaded = load_recipe(workspace / "trtls.toml")
    faults = {"stall": {"at_phase": 3, "seconds": 60}, "fsize_limit_bytes": 1 << 20, "commit_delay_s": 1.0}
    cell = {"settings": {"optimization_level": 1}, "output": "build/demo-1.engine", "cache_mode": "off"}
    jobs = [
        worker_job(loaded, "demo", "demo-1"),
        worker_job(loaded, "large", "large-1", faults=faults),
        worker_job(loaded, "demo", "demo-2", overrides=cell),
    ]
    from trtls.builds.supervisor.speculation import job_ahead, job_to_remember

    ahead = job_ahead(job_to_remember(jobs[0]), "demo", "demo-3")  # the job sent before the check
    assert ahead is not None and ahead.job["hold_commit"] is True
    for sent in [*jobs, ahead.job]:
        assert WorkerJob.model_validate(sent).model_dump(mode="json", exclude_unset=True) == sent
    assert len(jobs[1]["profiles"]) == 48 and jobs[2]["timing_cache"]["mode"] == "off"


def test_the_protocol_document_lists_every_key_of_the_job() -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "protocol.md").read_text()
    table = doc[doc.index("<!-- generated:job -->") : doc.index("<!-- /generated:job -->")]
    for key in WorkerJob.model_fields:
        assert f"| `{key}` |" in table or f"| `{key}?` |" in table, key
