"""core.cgroups: how many CPUs a process may keep busy — its affinity, lowered to its cgroup's CPU quota.

Real processes: a child pinned to one CPU, and a child moved into a real cgroup v1 `cpu` group with a quota (this
machine's layout, as root); cgroup v2's `cpu.max` is read from files written as the kernel writes them (a v2 tree
cannot be made here)."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from trtls.core.cgroups import dirs_from_lines, quota_of_dirs, usable_cpus

ROOT = Path(__file__).resolve().parents[2]
REPORT = (
    "import sys, json; sys.stdin.readline()\n"
    "from trtls.core.cgroups import usable_cpus, cpu_quota, affinity_cpus\n"
    "from trtls.builds.supervisor.speculation import _cpus\n"
    "print(json.dumps([usable_cpus(), cpu_quota(), affinity_cpus(), _cpus()]))\n"
)
V1_CPU = Path("/sys/fs/cgroup/cpu")


def _child(pin: set[int] | None = None) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "server")}
    return subprocess.Popen(
        [sys.executable, "-c", REPORT],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        preexec_fn=(lambda: os.sched_setaffinity(0, pin)) if pin else None,
    )


def _answer(child: subprocess.Popen[str]) -> list:
    import json

    out, _ = child.communicate("go\n", timeout=60)
    assert child.returncode == 0
    return json.loads(out)


@pytest.fixture
def quota_group() -> Iterator[Path]:
    """A real cgroup v1 `cpu` group under this process's own, removed afterwards (root and a writable v1 mount)."""
    here = next((line.split(":", 2)[2] for line in Path("/proc/self/cgroup").read_text().splitlines()
                 if "cpu" in line.split(":", 2)[1].split(",")), None)  # fmt: skip
    parent = V1_CPU / (here or "/").lstrip("/")
    group = parent / f"trtls-test-{uuid.uuid4().hex[:8]}"
    try:
        group.mkdir()
    except OSError as exc:
        pytest.skip(f"no writable cgroup v1 cpu controller here ({exc.strerror}): the v2 files are read below")
    try:
        yield group
    finally:
        for sub in sorted(group.rglob("*"), reverse=True):
            if sub.is_dir():
                sub.rmdir()
        group.rmdir()


def test_a_child_pinned_to_one_cpu_may_keep_one_busy() -> None:
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("one CPU here: pinning changes nothing")
    free, pinned = _answer(_child()), _answer(_child({min(os.sched_getaffinity(0))}))
    assert free[0] == len(os.sched_getaffinity(0)) and pinned[0] == 1 and pinned[2] == 1
    assert usable_cpus() == free[0]


def test_a_cgroup_quota_lowers_the_count_to_the_quota_rounded_up(quota_group: Path) -> None:
    (quota_group / "cpu.cfs_period_us").write_text("100000")
    (quota_group / "cpu.cfs_quota_us").write_text("100000")  # one CPU's time per period
    child = _child()
    (quota_group / "cgroup.procs").write_text(str(child.pid))
    usable, quota, affinity, check_counts = _answer(child)
    assert quota == 1.0 and usable == 1 and affinity == len(os.sched_getaffinity(0))
    assert check_counts == 1  # the check's wait for the worker's start sees the scarce CPU (speculation.let_it_start)


def test_a_quota_on_an_ancestor_binds_a_child_group_without_one(quota_group: Path) -> None:
    (quota_group / "cpu.cfs_period_us").write_text("100000")
    (quota_group / "cpu.cfs_quota_us").write_text("50000")  # half a CPU for the group and all below it
    inner = quota_group / "inner"
    inner.mkdir()
    child = _child()
    (inner / "cgroup.procs").write_text(str(child.pid))
    usable, quota, _, _ = _answer(child)
    assert quota == 0.5 and usable == 1


def test_no_quota_leaves_the_affinity(quota_group: Path) -> None:
    child = _child()  # a new group's quota is -1: none
    (quota_group / "cgroup.procs").write_text(str(child.pid))
    usable, quota, affinity, _ = _answer(child)
    assert quota is None and usable == affinity


def test_cgroup_v2_cpu_max_the_tightest_of_the_group_and_its_ancestors(tmp_path: Path) -> None:
    (tmp_path / "a" / "b" / "c").mkdir(parents=True)
    (tmp_path / "a" / "cpu.max").write_text("250000 100000\n")
    (tmp_path / "a" / "b" / "cpu.max").write_text("150000 100000\n")
    (tmp_path / "a" / "b" / "c" / "cpu.max").write_text("max 100000\n")
    dirs = dirs_from_lines(["0::/a/b/c"], "cpu", tmp_path)
    assert dirs[0] == tmp_path / "a" / "b" / "c"
    assert quota_of_dirs(dirs, tmp_path) == 1.5
    (tmp_path / "a" / "b" / "cpu.max").write_text("max 100000\n")
    assert quota_of_dirs(dirs, tmp_path) == 2.5
    (tmp_path / "a" / "cpu.max").write_text("max 100000\n")
    assert quota_of_dirs(dirs, tmp_path) is None


def test_a_line_of_another_controller_or_a_broken_line_names_no_cpu_folder(tmp_path: Path) -> None:
    assert dirs_from_lines(["4:memory:/x", "garbage", ""], "cpu", tmp_path) == []
    v1 = dirs_from_lines(["3:cpu,cpuacct:/docker/abc"], "cpu", tmp_path)
    assert tmp_path / "cpu,cpuacct" / "docker" / "abc" in v1 and tmp_path / "cpu" / "docker" / "abc" in v1
