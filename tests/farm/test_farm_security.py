"""A local farm is reachable from this machine only, and only with its token (issue 27 item 15); the warm farm's
head is signalled only when it proves to be that head.

On real Ray instances (`trtls farm up`, and the embedded instance of an `address = "local"` run): every listening
socket of the instance's processes is on 127.0.0.1 (read from /proc/net/tcp{,6} and the processes' descriptors),
the token file is 0600 (its folder private), and a gRPC call to the GCS without the token, or with a wrong one, is
refused UNAUTHENTICATED while the same call with the token is answered. A Ray without token authentication (its
installed version below the floor) is refused with TRT237 before anything starts. A state file planted to name a
process that is not the farm's head never gets that process signalled by `trtls farm down`.
"""

from __future__ import annotations

import ipaddress
import json
import os
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.farm.conftest import engine_table, farm_recipe

TRTLS = [sys.executable, "-m", "trtls.cli.main"]
HEAD_MODULE = "trtls.builds.farm.warm_head"


def tree(root: int) -> set[int]:
    """`root` and every live process under it."""
    parent: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                parent[int(entry)] = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    out, frontier = {root}, [root]
    while frontier:
        pid = frontier.pop()
        for child, ppid in parent.items():
            if ppid == pid and child not in out:
                out.add(child)
                frontier.append(child)
    return out


def _address(hex_addr: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    raw = bytes.fromhex(hex_addr)
    if len(raw) == 4:
        return ipaddress.IPv4Address(raw[::-1])
    ip6 = ipaddress.IPv6Address(b"".join(raw[i : i + 4][::-1] for i in range(0, 16, 4)))
    return ip6.ipv4_mapped or ip6


def listening(pids: set[int]) -> list[tuple[int, str]]:
    """(pid, "address:port") of every TCP socket in LISTEN state that one of `pids` holds."""
    inodes: dict[str, int] = {}
    for pid in pids:
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                try:
                    link = os.readlink(f"/proc/{pid}/fd/{fd}")
                except OSError:
                    continue
                if link.startswith("socket:["):
                    inodes[link[8:-1]] = pid
        except OSError:
            continue
    out = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for row in Path(table).read_text().splitlines()[1:]:
            fields = row.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if state == "0A" and inode in inodes:
                host, port = local.split(":")
                out.append((inodes[inode], f"{_address(host)}:{int(port, 16)}"))
    return out


def gcs_answer(address: str, token: str | None) -> str:
    """One call to the GCS (the node table), with `token` as Ray's clients send it: "OK" or the gRPC status."""
    import grpc
    from ray.core.generated import gcs_service_pb2, gcs_service_pb2_grpc

    with grpc.insecure_channel(address) as channel:
        stub = gcs_service_pb2_grpc.NodeInfoGcsServiceStub(channel)
        metadata = [("authorization", f"Bearer {token}")] if token is not None else []
        try:
            stub.GetAllNodeInfo(gcs_service_pb2.GetAllNodeInfoRequest(), metadata=metadata, timeout=60)
            return "OK"
        except grpc.RpcError as exc:
            return exc.code().name


def assert_secured(root: int, gcs: str, token_file: Path) -> None:
    sockets = listening(tree(root))
    assert any(addr.endswith(f":{gcs.rpartition(':')[2]}") for _, addr in sockets), sockets  # the GCS is seen
    assert len(sockets) >= 4, sockets  # GCS, raylet (node manager, object manager), a core worker at least
    assert [s for s in sockets if not s[1].startswith("127.0.0.1:")] == [], "a socket listens beyond loopback"
    assert gcs.startswith("127.0.0.1:")
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    token = token_file.read_text().strip()
    assert len(token) == 64
    assert gcs_answer(gcs, None) == "UNAUTHENTICATED"
    assert gcs_answer(gcs, "0" * 64) == "UNAUTHENTICATED"
    assert gcs_answer(gcs, token) == "OK"  # the refusal is the token's, not a dead or unreachable GCS


@pytest.mark.usefixtures("needs_ray")
def test_farm_up_listens_on_loopback_only_and_refuses_a_client_without_its_token(tmp_path: Path) -> None:
    env = {**os.environ, "TRTLS_FARM_STATE": str(tmp_path / "state" / "farm.json")}
    run = lambda *a: subprocess.run(TRTLS + list(a), env=env, capture_output=True, text=True, timeout=600)  # noqa: E731
    up = run("farm", "up", "--num-cpus", "1", "--workers", "0")
    assert up.returncode == 0, up.stderr[-3000:]
    try:
        status = json.loads(run("farm", "status", "--json").stdout)
        assert status["running"] is True and "nonce" not in status
        token_file = Path(status["token_path"])
        assert token_file.parent == (tmp_path / "state").resolve()
        assert stat.S_IMODE(Path(status["state"]).stat().st_mode) == 0o600  # it names the token file
        assert stat.S_IMODE(token_file.parent.stat().st_mode) == 0o700
        assert_secured(status["pid"], status["address"], token_file)
        assert "listening on 127.0.0.1 only" in up.stdout
    finally:
        down = run("farm", "down")
    assert down.returncode == 0, down.stderr
    assert not token_file.exists() and not Path(status["state"]).exists()


EMBEDDED = """
import json, os, sys
from trtls.builds.farm import cluster
from trtls.core.farm import ClusterTable
cluster.connect(ClusterTable(address="local", num_cpus=1))
import ray
print(json.dumps({"gcs": ray.get_runtime_context().gcs_address, "token": os.environ["RAY_AUTH_TOKEN_PATH"]}),
      flush=True)
sys.stdin.read()  # the test looks at the instance, then closes our stdin
cluster.disconnect()
"""


@pytest.mark.usefixtures("needs_ray")
def test_an_embedded_instance_listens_on_loopback_only_and_refuses_a_client_without_its_token(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_AUTH")}
    driver = subprocess.Popen([sys.executable, "-c", EMBEDDED], env=env, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert driver.stdout is not None and driver.stdin is not None
        line = driver.stdout.readline()
        assert line, driver.stderr.read() if driver.stderr else ""
        info = json.loads(line)
        token_file = Path(info["token"])
        assert stat.S_IMODE(token_file.parent.stat().st_mode) == 0o700
        assert_secured(driver.pid, info["gcs"], token_file)
        driver.stdin.close()
        assert driver.wait(timeout=120) == 0
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()
    assert not token_file.parent.exists()  # the instance's token goes with it


def old_ray_env(tmp_path: Path, version: str) -> dict[str, str]:
    """An environment whose installed-package metadata says Ray `version` (found before the real one)."""
    meta = tmp_path / "meta" / f"ray-{version}.dist-info"
    meta.mkdir(parents=True)
    (meta / "METADATA").write_text(f"Metadata-Version: 2.1\nName: ray\nVersion: {version}\n")
    path = os.pathsep.join(p for p in (str(tmp_path / "meta"), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path, "TRTLS_FARM_STATE": str(tmp_path / "state" / "farm.json")}


def test_a_ray_without_token_auth_is_refused_before_anything_starts(tmp_path: Path) -> None:
    env = old_ray_env(tmp_path, "2.49.0")
    up = subprocess.run(TRTLS + ["farm", "up", "--num-cpus", "1"], env=env, capture_output=True, text=True,
                        timeout=300)  # fmt: skip
    assert up.returncode == 1, up.stdout + up.stderr
    assert "TRT237 Ray 2.49.0 has no token authentication" in up.stderr and "≥ 2.52.0" in up.stderr
    assert "Traceback" not in up.stderr
    assert not (tmp_path / "state").exists()  # no state, no token, no head
    recipe = farm_recipe(tmp_path / "ws", "local", engine_table("demo", "demo", '{ "trtls/pool" = "x" }'))
    recipe.write_text(
        recipe.read_text().replace("keep_warm_s = 0\n", 'keep_warm_s = 0\nlabels = { "trtls/pool" = "x" }\n')
    )
    built = subprocess.run(TRTLS + ["build", str(recipe), "--matrix"], env=env, capture_output=True, text=True,
                           timeout=300)  # fmt: skip
    assert built.returncode != 0
    assert "TRT237" in built.stdout + built.stderr and "Traceback" not in built.stderr
    assert not (tmp_path / "ws" / "build").exists()


def decoy(nonce: str | None) -> subprocess.Popen:
    """A process whose command line names the warm head's module (as a planted state file would need)."""
    env = {k: v for k, v in os.environ.items() if k != "TRTLS_RUN_NONCE"}
    if nonce is not None:
        env["TRTLS_RUN_NONCE"] = nonce
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", HEAD_MODULE], env=env)


def plant(state: Path, proc: subprocess.Popen, nonce: str) -> None:
    from trtls.fs.kill import process_start_id

    state.parent.mkdir(parents=True, exist_ok=True)
    state.write_text(json.dumps({
        "address": "127.0.0.1:1", "pid": proc.pid, "num_cpus": 1, "labels": {}, "started_at": 0,
        "auth_mode": "token", "token_path": str(state.with_suffix(".token")),
        "start_id": process_start_id(proc.pid), "nonce": nonce,
    }))  # fmt: skip


def test_farm_down_signals_only_a_head_that_proves_to_be_the_one_the_state_names(tmp_path: Path) -> None:
    state = tmp_path / "state" / "farm.json"
    env = {**os.environ, "TRTLS_FARM_STATE": str(state)}
    stranger, head = decoy(None), decoy("a" * 32)
    try:
        plant(state, stranger, "a" * 32)  # the nonce of someone else: this process never carried it
        down = subprocess.run(TRTLS + ["farm", "down"], env=env, capture_output=True, text=True, timeout=120)
        assert down.returncode == 1 and "cannot be proved" in down.stderr, down.stdout + down.stderr
        assert stranger.poll() is None  # not signalled
        assert state.exists()  # and its record left as it was
        plant(state, head, "a" * 32)  # the process that carries the recorded nonce: the head, proven
        down = subprocess.run(TRTLS + ["farm", "down"], env=env, capture_output=True, text=True, timeout=120)
        assert down.returncode == 0, down.stdout + down.stderr
        assert head.wait(timeout=60) == -signal.SIGTERM
        assert not state.exists()
    finally:
        for p in (stranger, head):
            if p.poll() is None:
                p.kill()
                p.wait()
