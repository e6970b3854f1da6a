"""A local farm's run (`address = "local"`: the embedded instance), with the real CLI on a real Ray instance: what
happens beside and after the builds (issue 31).

- the instance starts no Ray worker nobody uses: its raylet would prestart one idle Python worker per CPU when the
  driver connects (15 on the 16-core host, 18.5 CPU-s of a 16-cell run); every Ray worker process of the run is the
  node's host actor; nor the head's API server (`dashboard.py`, for Ray's job and state APIs); its dashboard agent
  runs `--minimal` (no servers of its own);
- the node is this machine, so each cell's worker writes its engine at the requested output in place (nothing is
  sent back through Ray, written and fsynced a second time), and the evidence says so;
- the matrix summary reports each cell's tail — builderReturned, finishedOnNode, engineLocal, done — and when the
  summary was written, in order (benchmarks/bench_farm_overhead.py prints it as the tail's table).

States and orders, not durations: the seconds are the benchmark's.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.farm.conftest import farm_recipe
from tests.quickstart import quickstart_profiles
from trtls.builds.farm import proc_tree

TRTLS = [sys.executable, "-m", "trtls.cli.main"]


def embedded_recipe(ws: Path, cells: int, num_cpus: int) -> Path:
    path = farm_recipe(ws, "local", "")
    head = path.read_text().replace("keep_warm_s = 0\n", f"keep_warm_s = 0\nnum_cpus = {num_cpus}\n")
    head += 'labels = { "trtls/pool" = "tail" }\n\n'
    body = '[engines.m]\nonnx = "models/demo.onnx"\noutput = "build/m.engine"\n' + quickstart_profiles("demo")
    body += '\n\n[engines.m.run_on]\nlabels = { "trtls/pool" = "tail" }\nnum_cpus = 1\n'
    its = ", ".join(str(i + 1) for i in range(cells))
    body += '\n[engines.m.matrix]\noutput = "build/m-{avg_timing_iterations}.engine"\n'
    body += f"avg_timing_iterations = [{its}]\n"
    path.write_text(head + body)
    return path


class RayWorkers:
    """Every Ray worker process under `root`, by (pid, start), with every title it was seen with (a worker is
    `ray::IDLE` until an actor claims it, then `ray::<ActorClass>`), sampled until `stop`."""

    def __init__(self, root: int) -> None:
        self.root = root
        self.titles: dict[tuple[int, int], set[str]] = {}
        self.api_servers: set[int] = set()  # Ray's head API server (`dashboard/dashboard.py`), if one ran
        self.raylets: dict[int, list[str]] = {}  # pid → its argv (with the agents' commands it starts)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.is_set():
            for p in proc_tree.descendants(self.root).values():
                if "dashboard/dashboard.py" in p.name:
                    self.api_servers.add(p.pid)
                if p.name.split(" ", 1)[0].endswith("/raylet") and p.pid not in self.raylets:
                    with contextlib.suppress(OSError):
                        argv = Path(f"/proc/{p.pid}/cmdline").read_bytes().split(b"\0")
                        self.raylets[p.pid] = [a.decode(errors="replace") for a in argv]
                title = p.name.split(" ", 1)[0]
                if title.startswith("ray::") and "Agent" not in title:
                    self.titles.setdefault((p.pid, p.start), set()).add(title)
            self.stop.wait(0.1)

    def never_claimed(self) -> list[tuple[int, set[str]]]:
        """Workers only ever seen idle: started for nothing."""
        return [(pid, t) for (pid, _), t in self.titles.items() if t == {"ray::IDLE"}]


@pytest.mark.usefixtures("needs_ray")
def test_an_embedded_run_starts_no_idle_ray_worker_writes_engines_in_place_and_reports_its_tail(
    tmp_path: Path,
) -> None:
    recipe = embedded_recipe(tmp_path / "ws", cells=2, num_cpus=3)
    env = {**os.environ, "TRTLS_FARM_STATE": str(tmp_path / "farm.json"), "TRTLS_STORE": "off"}
    cli = subprocess.Popen(
        TRTLS + ["build", str(recipe), "--matrix", "--json"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    workers = RayWorkers(cli.pid)
    try:
        out, err = cli.communicate(timeout=600)
    finally:
        workers.stop.set()
        workers.thread.join()
    assert cli.returncode == 0, err[-2000:]
    records = [json.loads(line) for line in out.splitlines()]
    parent = records[-1]["summary"]
    assert parent["outcome"] == "built"

    # the raylet prestarted nobody: every Ray worker the run saw became the node's host actor
    assert workers.titles, "no Ray worker process was seen under the run"
    assert workers.never_claimed() == [], workers.titles
    # a title is sampled: a worker may be seen only while it runs one of the host's methods (`ray::NodeHost.open`)
    assert all(any(x.startswith("ray::NodeHost") for x in t) for t in workers.titles.values()), workers.titles
    assert workers.api_servers == set()  # nor the head's API server (Ray's job and state APIs: never called)
    # its raylet starts the dashboard agent minimal (lean_node: no gRPC or HTTP server of its own, no metrics)
    assert len(workers.raylets) == 1, workers.raylets
    agent = [a for a in next(iter(workers.raylets.values())) if a.startswith("--dashboard_agent_command=")]
    assert len(agent) == 1 and "--minimal" in agent[0].split(" "), workers.raylets

    # each engine was written at its output by the node's worker on this machine, and is what the summary says
    summaries = {r["buildId"]: r["summary"] for r in records if r.get("type") == "cell_summary"}
    assert len(summaries) == 2 and len(parent["cells"]) == 2
    for row in parent["cells"]:
        cell = summaries[row["buildId"]]
        assert row["outcome"] == cell["outcome"] == "built"
        output = Path(row["output"])
        assert output.parent == recipe.parent / "build"
        art = cell["engineArtifact"]
        assert art["path"] == str(output) and "node_path" not in art, art
        assert hashlib.sha256(output.read_bytes()).hexdigest() == art["sha256"] == row["engineSha256"]
        notes = " ".join(cell.get("notes") or [])
        assert "written in place at the output" in notes and "sent back" not in notes, notes

    # the tail of every cell, in order, then the summary
    cluster = parent["cluster"]
    tails = [c["tail"] for c in cluster["cells"].values()]
    assert len(tails) == 2
    for t in tails:
        assert list(t) == ["builderReturned", "finishedOnNode", "engineLocal", "done"], t
        assert t["builderReturned"] <= t["finishedOnNode"] <= t["engineLocal"] <= t["done"] <= cluster["summaryS"]
    assert cluster["fixedCost"]["firstPhaseStart"] <= min(t["builderReturned"] for t in tails)
