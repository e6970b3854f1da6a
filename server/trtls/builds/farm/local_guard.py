"""A Ray instance trtls starts on this machine — the embedded one of an `address = "local"` run, and `trtls farm up`'s
head — listens on 127.0.0.1 only and admits only a client that holds its token (issue 27 item 15).

Why: anyone who reaches one of Ray's ports can run code as this user. Left to itself, Ray binds the GCS, raylet,
object manager, core workers, node agents and dashboard to the machine's routable address (or to every interface),
and its token authentication is off unless told otherwise (Ray 2.52–2.5x: off by default; later: on only for a bare
`ray.init()`, never when a driver names an address).

- **Loopback**: Ray's servers listen on 127.0.0.1 only when the node's IP *is* 127.0.0.1, but `ray.init` turns
  127.0.0.1 — a `_node_ip_address`, and the host of a GCS address a driver names — into the routable address
  (`services.resolve_ip_for_localhost`), unless Ray is told it is local-only (`RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`,
  the switch Ray uses on laptops: its own address is then 127.0.0.1). `use_token` sets that switch for the driver
  and every process it starts; the head node's address is also set where Ray's `Node` receives it
  (`lean_node`), and `started_problem` checks the instance after it started: one whose GCS or node is not
  on 127.0.0.1 is refused (TRT237).
- **Token**: `RAY_AUTH_MODE=token` set explicitly, the token (256 bits) in a file written 0600 through the door
  (Ray's own `~/.ray/auth_token` would be 0644 under the usual umask) and named by `RAY_AUTH_TOKEN_PATH`; every
  process of the instance inherits both, a driver of the warm farm sets them from the farm's state file.
- **A Ray that cannot authenticate is refused** before anything starts: token authentication (`RAY_AUTH_MODE`,
  `RAY_AUTH_TOKEN_PATH`) exists from Ray 2.52.0 (verified in the 2.52.0 and 2.60.0 wheels' sources).
"""

from __future__ import annotations

import os
import re
import secrets
import sys
from pathlib import Path
from typing import Any

from trtls import fs
from trtls.fs import Kind

LOOPBACK = "127.0.0.1"
AUTH_FLOOR = (2, 52, 0)  # the first Ray with token authentication (RAY_AUTH_MODE=token, RAY_AUTH_TOKEN_PATH)
FLOOR_TEXT = ".".join(map(str, AUTH_FLOOR))
TOKEN_MODE = 0o600


def installed_ray() -> str | None:
    """The installed Ray's version, read without importing Ray (None: not installed)."""
    from importlib import metadata

    try:
        return metadata.version("ray")
    except metadata.PackageNotFoundError:
        return None


def version_problem(version: str | None) -> str | None:
    """Why this Ray cannot secure a local instance, or None."""
    if version is None:
        return None  # not installed: TRT234 says how to install it
    parts = [int(p) for p in re.findall(r"\d+", version)[:3]]
    if tuple(parts + [0] * (3 - len(parts))) >= AUTH_FLOOR:
        return None
    return (
        f"TRT237 Ray {version} has no token authentication: a local Ray instance would admit anyone who reaches its "
        f"ports. Install Ray ≥ {FLOOR_TEXT}: pip install -U 'trtls[farm]'"
    )


LOCAL_ONLY = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"  # "0": Ray's own address is 127.0.0.1 (ENABLE_RAY_CLUSTER)


def token_env(token_path: Path) -> dict[str, str]:
    """What every process of a secured instance, and every driver of it, runs with."""
    return {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(token_path), LOCAL_ONLY: "0"}


def write_token(token_path: Path, within: Path) -> None:
    """A new token in a 0600 file (atomic, never through a symlink, inside `within`)."""
    fs.atomic_write_text(token_path, secrets.token_hex(32), kind=Kind.farm_state, within=within, mode=TOKEN_MODE)


def use_token(token_path: Path) -> None:
    """This process's Ray is local-only and authenticates with the token in `token_path` (set before `ray.init`).
    Ray reads its configuration and token once and caches them: when Ray is already imported, the caches are
    refreshed (as Ray's own `_enable_token_auth` does)."""
    os.environ.update(token_env(token_path))
    os.environ.pop("RAY_AUTH_TOKEN", None)  # it would take precedence over the file
    constants = sys.modules.get("ray._private.ray_constants")
    if constants is not None:
        setattr(constants, "ENABLE_RAY_CLUSTER", False)  # noqa: B010 (read from the environment at Ray's import)
    raylet = sys.modules.get("ray._raylet")
    if raylet is None:
        return
    try:
        raylet.Config.initialize("")
        raylet.AuthenticationTokenLoader.instance().reset_cache()
    except AttributeError:  # a Ray without token auth: version_problem has refused it already
        pass


def token_auth_on(ray: Any) -> bool:
    """This process's Ray (the module, imported by the caller) sends and checks tokens."""
    raylet = getattr(ray, "_raylet", None)
    mode = getattr(raylet, "get_authentication_mode", None)
    token = getattr(getattr(raylet, "AuthenticationMode", None), "TOKEN", None)
    return callable(mode) and token is not None and mode() == token


def host_of(address: str) -> str:
    host = address.rpartition(":")[0]
    return host.strip("[]")


def started_problem(ray: Any) -> str | None:
    """After a local instance started (or a driver joined the warm farm): why it is not secured, or None."""
    node = getattr(getattr(getattr(ray, "_private", None), "worker", None), "_global_node", None)
    node_ip = getattr(node, "node_ip_address", None)
    gcs = str(ray.get_runtime_context().gcs_address or "")
    if node_ip != LOOPBACK or host_of(gcs) != LOOPBACK:
        return (
            f"TRT237 the local Ray instance is not on loopback only (node {node_ip}, GCS {gcs}): this Ray does not "
            "take the node address trtls sets; nothing is built on it"
        )
    if not token_auth_on(ray):
        return "TRT237 the local Ray instance does not authenticate its clients (RAY_AUTH_MODE is not token)"
    return None
