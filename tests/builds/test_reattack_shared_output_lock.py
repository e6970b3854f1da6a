"""Two projects that write one output outside their folders (`allow_outside`: two checkouts of one repository
deploying to the same folder). Each locked the output in its own `.trtls/locks`, so neither saw the other: a restore
in one removed the other's half-written engine as a stale temp (`<output>.trtls-tmp-*`) and wrote the output while
the other held its lock — the other then said "TRT405 … No such file or directory; nothing was restored" and rebuilt
from scratch. An output outside the recipe folder is now locked where every project looks (the per-user cache
folder): the second waits for the first.

Real `trtls build` processes of the quickstart `demo` in two projects, one real store; the first project's writer is
a real process holding the output's lock (trtls's own `OutputLock`) with its temp file beside the output."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

HOLDER = """
import sys, time
from pathlib import Path
from trtls.builds.supervisor.output_lock import OutputLock, lock_path
project, out, flag = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
lock = OutputLock(lock_path(project / ".trtls" / "locks", out), out)
assert lock.try_acquire({"buildId": "demo-holder-build", "pid": 0, "owner": {"kind": "trtls build"}})
temp = out.with_name(out.name + ".trtls-tmp-demo-holder-build")
temp.write_bytes(b"half of an engine")
print("held", flush=True)
deadline = time.monotonic() + 60
while not flag.exists() and time.monotonic() < deadline:
    time.sleep(0.05)
temp.unlink()
lock.release()
"""


def _project(src: Path, where: Path, deploy: Path) -> Path:
    shutil.copytree(src, where)
    text = (where / "trtls.toml").read_text().replace('output = "build/demo.engine"', f'output = "{deploy}"', 1)
    (where / "trtls.toml").write_text(f'allow_outside = ["{deploy.parent}"]\n' + text)
    return where


def test_a_restore_waits_for_another_projects_writer_of_the_same_outside_output(
    workspace: Path, tmp_path: Path
) -> None:
    deploy = tmp_path / "deploy" / "demo.engine"
    deploy.parent.mkdir()
    env = {**os.environ, "TRTLS_STORE": str(tmp_path / "store"), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    mine = _project(workspace, tmp_path / "mine", deploy)
    theirs = _project(workspace, tmp_path / "theirs", deploy)
    build = [sys.executable, "-m", "trtls", "build", str(mine), "--engine", "demo"]
    assert subprocess.run(build, env=env, capture_output=True, timeout=600).returncode == 0  # in the store now
    deploy.unlink()
    flag = tmp_path / "release"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(theirs), str(deploy), str(flag)], env=env, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        temp = deploy.with_name(deploy.name + ".trtls-tmp-demo-holder-build")
        second = subprocess.Popen(build, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(4)  # the restore itself takes a fraction of a second here
        assert temp.read_bytes() == b"half of an engine", "the other project's half-written engine was removed"
        assert not deploy.exists(), "the output was written while another project's writer held it"
        flag.touch()
        out, err = second.communicate(timeout=600)
        assert second.returncode == 0 and "up to date" in out, out + err
        assert deploy.is_file() and not temp.exists()
    finally:
        flag.touch()
        holder.wait(timeout=60)
