"""The build farm sharing one engine store (issue 19, docs/store.md "Matrices and the build farm").

On the real two-node labelled test cluster, `trtls build --matrix` (a real CLI process, the submitting machine)
builds each cell on its node and publishes each cell's engine to the `[store] path` from the output the cell wrote,
in the submitting process; the same matrix run again restores every cell from the store: no node, no worker. The
key's honesty: a cell built by another builder version than its key was computed with is not published under that
key; full TensorRT on a cluster is not looked up nor published (the key would hold the submitting machine's GPU).
Workers are counted with the store tests' probe (tests/store/helpers.probe_env), handed to the nodes through the
recipe's `[cluster] runtime_env`."""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.farm.conftest import LABEL, engine_table, farm_recipe
from tests.store.helpers import entries, probe_env, probes, summaries, with_store

MATRIX = """
[engines.demo.matrix]
output = "build/demo-{compute_capabilities}.engine"
compute_capabilities = ["SM89", "SM120"]
"""


def _recipe(ws: Path, address: str, labels: str, env_vars: dict[str, str] | None = None) -> Path:
    path = farm_recipe(ws, address, engine_table("demo", "demo", labels))
    if env_vars:  # the nodes' Ray workers (and the build workers they start) run with these
        table = ", ".join(f"{k} = {json.dumps(v)}" for k, v in env_vars.items())
        path.write_text(
            path.read_text().replace(
                "keep_warm_s = 0\n", f"keep_warm_s = 0\nruntime_env = {{ env_vars = {{ {table} }} }}\n"
            )
        )
    return path


# A node's build worker may be started before its job (trtls.builds.farm.preloaded_worker, importing TensorRT while
# the cell is placed): the probe counts it as a worker too.
PRELOADED_PROBE = """
if _d and "trtls.builds.farm.preloaded_worker" in getattr(sys, "orig_argv", []):
    open(os.path.join(_d, f"worker-{os.getpid()}"), "w").close()
"""


def _probe_env(probe: Path) -> dict[str, str]:
    env = probe_env(probe)
    site = probe / "site" / "sitecustomize.py"
    site.write_text(site.read_text() + PRELOADED_PROBE)
    return env


def _run(ws: Path, env: dict[str, str], *args: str) -> tuple[subprocess.CompletedProcess[str], int]:
    cmd = [sys.executable, "-m", "trtls", "build", str(ws), "--engine", "demo", *args]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    out, err = proc.communicate(timeout=900)
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err), proc.pid


def test_the_farm_shares_one_store_second_run_uses_no_node(ray_cluster, tmp_path: Path) -> None:
    ws, store, probe = tmp_path / "ws", tmp_path / "store", tmp_path / "probe"
    env = _probe_env(probe)
    path = _recipe(
        ws,
        ray_cluster.address,
        f'{{ "{LABEL}" = "{{compute_capabilities}}" }}',
        {"PYTHONPATH": env["PYTHONPATH"], "TRTLS_TEST_PROBE_DIR": str(probe)},
    )
    path.write_text(path.read_text() + MATRIX)
    with_store(ws, store)

    first, cli_pid = _run(ws, env, "--matrix")
    assert first.returncode == 0, first.stdout + first.stderr
    cells = [s for s in summaries(ws) if s.get("cell")]
    assert sorted(s["cell"] for s in cells) == ["SM120", "SM89"], [s.get("cell") for s in summaries(ws)]
    workers = probes(probe, "worker")
    # every cell was built on its node, by a worker the probe saw (the nodes share this machine's pid space)
    assert sorted(f"worker-{s['workerPid']}" for s in cells) == workers and len(workers) == 2
    assert probes(probe, "tensorrt") == sorted(f"tensorrt-{s['workerPid']}" for s in cells)  # only they imported it
    for s in cells:
        assert s["outcome"] == "built" and s["node"]["labels"][LABEL] == s["cell"], (s["error"], s["stderrTail"])
        assert s["store"]["used"] and s["engineKey"] and not s["store"]["warnings"], s["store"]
    assert len({s["node"]["nodeId"] for s in cells}) == 2  # one cell on each node
    assert sorted(e.name for e in entries(store)) == sorted(s["engineKey"] for s in cells)
    for s in cells:
        entry = store / "entries" / s["engineKey"]
        record = json.loads((entry / "entry.json").read_text())
        # published by the submitting process (the CLI), not on the node (whose worker was another process) …
        assert record["build"]["buildId"] == s["buildId"]
        assert record["build"]["publishedBy"] == {"hostname": socket.gethostname(), "pid": cli_pid}
        assert s["workerPid"] != cli_pid
        # … from the output the cell wrote on the submitting machine: same bytes, the sha256 the node reported
        output = ws / "build" / f"demo-{s['cell']}.engine"
        assert Path(s["engineArtifact"]["path"]) == output
        assert (entry / "engine").read_bytes() == output.read_bytes()
        assert hashlib.sha256(output.read_bytes()).hexdigest() == s["engineArtifact"]["sha256"]
    tensorrt_imports = probes(probe, "tensorrt")
    built_ids = {s["cell"]: s["buildId"] for s in cells}
    node_ids = {s["node"]["nodeId"] for s in cells}

    before = {p.name for p in (ws / ".trtls" / "runs").iterdir()}
    again, _ = _run(ws, env, "--matrix")
    assert again.returncode == 0, again.stdout + again.stderr
    said = [line for line in again.stdout.splitlines() if ": up to date — engine from build " in line]
    assert sorted(line.split(":")[0] for line in said) == ["demo/SM120", "demo/SM89"], again.stdout
    assert "connecting to the Ray cluster" not in again.stderr, again.stderr  # no node was asked for
    assert probes(probe, "worker") == workers, "no worker started for cells the store holds"
    assert probes(probe, "tensorrt") == tensorrt_imports, "nothing imported TensorRT"
    new = [s for s in summaries(ws) if s["buildId"] not in before]
    assert len(new) == 2 and all(s["outcome"] == "reused" for s in new), [s["outcome"] for s in new]
    for s in new:
        assert s.get("node") is None and s["workerPid"] is None
        assert not any(n in json.dumps(s) for n in node_ids), "the reuse names no node"
        cell = s["engineArtifact"]["path"].rsplit("demo-", 1)[1].removesuffix(".engine")
        assert s["reusedFrom"]["buildId"] == built_ids[cell]


def _fake_builder(root: Path, module: str, dist: str, version: str) -> Path:
    """A copy of `module` that the key finds first (find_spec; its version from the dist-info beside it) and that
    fails if anything imports it: what a submitting machine with another builder version looks like to the key."""
    pkg = root / module
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(f"raise ImportError('{module} here is only for the key (a test)')\n")
    (root / f"{dist}-{version}.dist-info").mkdir()
    return root


def test_a_cell_built_by_another_builder_version_than_its_key_is_not_published(ray_cluster, tmp_path: Path) -> None:
    """Real path: the submitting machine has tensorrt_rtx 9.9.9 (as the key sees it), the node builds with the
    installed one. The engine is built and at its output, but not stored under the key; the evidence names both."""
    from trtls.store.key import builder_identity

    real = builder_identity("tensorrt_rtx")["version"]
    ws, store = tmp_path / "ws", tmp_path / "store"
    _recipe(ws, ray_cluster.address, f'{{ "{LABEL}" = "SM89" }}')
    with_store(ws, store)
    fake = _fake_builder(tmp_path / "fake", "tensorrt_rtx", "tensorrt_rtx_cu13", "9.9.9")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(fake), os.environ.get("PYTHONPATH")]))}

    done, _ = _run(ws, env)
    assert done.returncode == 0, done.stdout + done.stderr
    (s,) = [s for s in summaries(ws) if s.get("node")]
    assert s["outcome"] == "built" and (ws / "build" / "demo.engine").is_file()
    assert s["builderModule"] == "tensorrt_rtx" and s["tensorrtVersion"] == real
    (warning,) = s["store"]["warnings"]
    assert warning.startswith("not stored: builder tensorrt_rtx ") and f"tensorrt_rtx {real} (on node " in warning
    assert "tensorrt_rtx 9.9.9 (the key's, on the submitting machine)" in warning, warning
    assert entries(store) == [], "nothing published under a key the build does not match"
    (record,) = json.loads((ws / ".trtls" / "engines" / "demo.json").read_text())["builds"]
    assert record["stored"] is False and record["keyMismatch"] == warning


def test_full_tensorrt_on_a_cluster_is_not_looked_up_nor_published(tmp_path: Path, monkeypatch) -> None:
    """No full TensorRT and no GPU here: a `tensorrt` the key finds (fake) stands for it. On a [cluster] the store
    is not used (the key would hold this machine's device, the node's GPU is what the plan depends on); without a
    cluster it is. And a full-TensorRT build whose device differs from the key's is not published."""
    from trtls.builds.avoidance import lookup as avoidance
    from trtls.core.recipe import load_recipe
    from trtls.core.summary_record import Summary
    from trtls.store.farm_keys import FULL_TRT_ON_CLUSTER, builder_mismatch

    monkeypatch.syspath_prepend(str(_fake_builder(tmp_path / "fake", "tensorrt", "tensorrt_cu12", "10.13.0.35")))
    ws = tmp_path / "ws"
    path = _recipe(ws, "local", f'{{ "{LABEL}" = "SM89" }}')
    text = path.read_text().replace("cancel_grace_s = 30\n", 'cancel_grace_s = 30\nbuilder_module = "tensorrt"\n')
    path.write_text(text)
    with_store(ws, tmp_path / "store")
    loaded = load_recipe(path)
    assert loaded.recipe is not None, loaded.findings
    use = avoidance.prepare(loaded, "demo")
    assert use.key is not None and use.key.parts["builder"]["module"] == "tensorrt"
    assert use.store is None and use.not_used == FULL_TRT_ON_CLUSTER
    assert use.record()["used"] is False and "full TensorRT on a [cluster]" in use.record()["why"]

    local = ws / "local.toml"
    local.write_text(text.split("\n\n", 1)[1] + f'\n[store]\npath = "{tmp_path / "store"}"\n')
    use = avoidance.prepare(load_recipe(local), "demo")
    assert use.store is not None and use.not_used is None  # a local full-TensorRT build is keyed by its own device

    device = use.key.parts["target"]["device"] if use.key is not None else None

    def summary(device_name: str | None) -> dict[str, Any]:
        env = {"device_name": device_name}
        return {"builderModule": "tensorrt", "tensorrtVersion": "10.13.0.35", "environment": env}

    said = builder_mismatch(use.key, Summary.written(summary("L4")))
    assert said is not None and f"device L4 (on this build) ≠ {device} (the key's" in said
    assert builder_mismatch(use.key, Summary.written(summary(device))) is None
    said = builder_mismatch(use.key, Summary.written({**summary(device), "tensorrtVersion": "10.14.1"}))
    assert said is not None and "builder tensorrt 10.14.1 (on this build) ≠ tensorrt 10.13.0.35" in said
