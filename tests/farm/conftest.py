"""A real Ray cluster on this machine: a head that builds nothing and two labelled nodes of one CPU each.

Session-scoped (a cluster takes ~6 s to start); every process it started is shut down at the end. Nodes are
small on purpose: the machine has 2 cores shared with other work.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import QUICKSTART
from tests.quickstart import quickstart_profiles

LABEL = "trtls/target"


# .ci/run installs the farm extra and sets TRTLS_REQUIRE_FARM=1, so a missing Ray fails the farm suite there instead
# of skipping it silently; on a developer machine without the extra the tests skip and say why.
REQUIRED = os.environ.get("TRTLS_REQUIRE_FARM") == "1"


def require_ray() -> None:
    try:
        import ray  # noqa: F401
    except ImportError as exc:
        if REQUIRED:
            pytest.fail(f"Ray is required here (TRTLS_REQUIRE_FARM=1) but cannot be imported: {exc}")
        pytest.skip("the farm extra is not installed: pip install -e '.[farm]' (.ci/run requires it)")


@pytest.fixture
def needs_ray() -> None:
    """For a test that starts its own Ray instance (no session cluster): Ray importable, or fail/skip as above."""
    require_ray()


@pytest.fixture(scope="session")
def ray_cluster():
    require_ray()
    import ray
    from ray.cluster_utils import Cluster

    from trtls.builds.farm import cluster as farm_cluster
    from trtls.builds.farm import node_scratch

    # A loaded machine (2 cores shared by many agents) can take longer than Ray's default to register a raylet.
    os.environ.setdefault("RAY_raylet_start_wait_time_s", "180")
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "labels": {LABEL: "head"}})
    try:  # whatever happens while it starts, every process it started is shut down
        nodes = {
            "SM89": c.add_node(num_cpus=1, labels={LABEL: "SM89"}),
            "SM120": c.add_node(num_cpus=1, labels={LABEL: "SM120"}),
        }
        c.wait_for_nodes()
        ray.init(address=c.address, include_dashboard=False, log_to_driver=False)
        c.nodes = nodes  # type: ignore[attr-defined]
        yield c
    finally:
        farm_cluster.disconnect()
        ids = [node.node_id for node in c.list_all_nodes()]
        c.shutdown()
        for node_id in ids:  # the test started these nodes: their scratch goes with them (builds/farm/node_scratch.py)
            node_scratch.remove(node_id)


def gpu_node(cluster) -> None:
    """A node of the session's cluster that advertises one GPU under the label `gpu` (Ray schedules the resource; the
    node has none): added by the first test that asks for it."""
    if not any(getattr(node._ray_params, "num_gpus", None) for node in cluster.list_all_nodes()):
        cluster.add_node(num_cpus=2, num_gpus=1, labels={LABEL: "gpu"})
        cluster.wait_for_nodes()


def farm_recipe(ws: Path, address: str, body: str) -> Path:
    """A recipe beside a copy of the quickstart models, pointed at the test cluster."""
    (ws / "models").mkdir(parents=True, exist_ok=True)
    for m in ("demo.onnx", "large.onnx"):
        if not (ws / "models" / m).exists():
            shutil.copy(QUICKSTART / "models" / m, ws / "models" / m)
    path = ws / "trtls.toml"
    # keep_warm_s = 0: each test sees its own actors end (test_matrix_on_cluster turns warm workers on)
    path.write_text(f'[cluster]\naddress = "{address}"\nqueue_timeout_s = 600\nkeep_warm_s = 0\n\n' + body)
    return path


def engine_table(name: str, model: str, labels: str, extra: str = "") -> str:
    return (
        f'[engines.{name}]\nonnx = "models/{model}.onnx"\noutput = "build/{name}.engine"\ncancel_grace_s = 30\n'
        + quickstart_profiles(model)
        + f"\n\n[engines.{name}.run_on]\nlabels = {labels}\nnum_cpus = 1\n"
        + extra
    )


def kill_driver_mid_build(
    args: list[str], env: dict[str, str] | None = None, before: Callable[[int], object] | None = None
) -> int:
    """`trtls <args> --json` (a build on the farm) in a session of its own, read until its remote builder is mid-build,
    `before(worker pid)`, then SIGKILL: the driver dies without a word. Returns the cell's worker pid."""
    cli = subprocess.Popen(
        [sys.executable, "-m", "trtls.cli.main", *args, "--json"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    worker_pid = None
    try:
        assert cli.stdout is not None
        for raw in cli.stdout:
            ev = json.loads(raw)
            worker_pid = ev.get("pid") if ev.get("type") == "build_started" else worker_pid
            if ev.get("type") == "phase_start":
                break
        assert worker_pid, "the cell's worker never started"
        if before is not None:
            before(worker_pid)
        os.kill(cli.pid, signal.SIGKILL)
        cli.wait()
    finally:
        if cli.poll() is None:
            cli.kill()
    return int(worker_pid)
