"""`[store]` in trtls.toml: where built engines are kept and reused (docs/store.md). The size is checked here, as
the recipe loads; the folder is judged by `store_path_findings` (`[store] path` like any write: `fs.store_root`)
and again when a build uses the store (a located TRT330/TRT331/TRT339/TRT340)."""

from __future__ import annotations

import math
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, Field, ValidationInfo, field_validator

from trtls.core.findings import Finding, Origin, Severity
from trtls.core.validation import RECIPE_TABLE

if TYPE_CHECKING:
    from trtls.core.recipe import LoadedRecipe, RecipeFile

_UNITS = {"": 1, "b": 1, "k": 1024, "kb": 1000, "kib": 1024, "m": 1024**2, "mb": 1000**2, "mib": 1024**2}
_UNITS |= {"g": 1024**3, "gb": 1000**3, "gib": 1024**3, "t": 1024**4, "tb": 1000**4, "tib": 1024**4}
SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")


def parse_size(value: int | str) -> int | None:
    """`20 GiB`, `500MB`, `1048576` → bytes; None when it is not a size (the one rule: the recipe's check, the store
    and `store gc --max-size` all ask it)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value if value > 0 else None
    m = SIZE.match(str(value))
    if m is None or m.group(2).lower() not in _UNITS:
        return None
    number = float(m.group(1)) * _UNITS[m.group(2).lower()]
    if not math.isfinite(number) or number >= 1 << 63:  # `999…9` (400 digits) is a float infinity: no size at all
        return None
    n = int(number)
    return n if n > 0 else None


class StoreTable(BaseModel):
    model_config = RECIPE_TABLE

    path: str | None = Field(
        None,
        description="Store folder, relative to this recipe (a team's or the farm's shared mount). Default: "
        "$XDG_CACHE_HOME/trtls/store (~/.cache/trtls/store).",
    )
    mode: Literal["read_write", "read", "off"] = Field(
        "read_write", description="read_write: reuse and publish; read: reuse only (CI consumers); off: no store."
    )
    max_size: int | str | None = Field(
        None, description='Size bound, e.g. "20 GiB" (default); least recently used entries are evicted.'
    )
    trust: Literal["user", "group"] = Field(
        "user",
        description="Who may have written the engines this recipe reuses: user (default): only you (or root), a "
        "store others can write is refused; group: also the store folder's group (a team's shared store). A "
        "world-writable store is always refused.",
    )

    signing_key_file: str | None = Field(
        None,
        description="A file holding the team's secret (at least 32 bytes), relative to this recipe: every entry a "
        "build publishes is signed with it (HMAC-SHA256) and an entry whose signature is missing or wrong is never "
        "used. Default: $TRTLS_STORE_KEY_FILE, else entries are not signed.",
    )

    remote: str | None = Field(
        None,
        description="A remote store shared by CI runners and farm nodes without a shared folder: the URL of an "
        "HTTP server that stores what is PUT and serves it back by GET (nginx WebDAV, bazel-remote, ccache's HTTP "
        "backend layout): `ac/<key>` holds an entry's record, `cas/<sha256>` its engine. A local miss is looked up "
        "there (verified like a local entry), a publish is sent there. Default: $TRTLS_STORE_REMOTE, else none.",
    )

    @field_validator("path", "signing_key_file")
    @classmethod
    def _named(cls, v: str | None, info: ValidationInfo) -> str | None:
        if v is not None and not v.strip():  # was silently the default store (or no key): leave the key out for that
            what = "the store's folder" if info.field_name == "path" else "the key file"
            raise ValueError(f"is empty: name {what}, or leave {info.field_name} out for the default")
        return v

    @field_validator("max_size")
    @classmethod
    def _size(cls, v: int | str | None) -> int | str | None:
        if v is None:
            return v
        if isinstance(v, int) and v <= 0:
            raise ValueError("max_size must be a positive number of bytes")
        if parse_size(v) is None:  # `999…9` (400 digits) passed the check, then the build said 20 GiB (or crashed)
            raise ValueError('max_size must be a size such as "20 GiB", "500 MB" or a number of bytes')
        return v

    @field_validator("remote")
    @classmethod
    def _remote(cls, v: str | None) -> str | None:
        if v is not None and (why := remote_problem(v)) is not None:
            raise ValueError(f"remote {why}")
        return v


def remote_problem(url: str) -> str | None:
    """Why `url` cannot name a remote store, or None: an http:// or https:// URL with a host, and no user name or
    password in it (a recipe is committed and printed: a secret there leaks; authenticate at the network or a
    proxy instead), no query and no fragment (the store's paths are appended to it)."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port  # a port that is not a number raises here
    except ValueError as exc:
        return f"is not a URL ({exc})"
    if parts.scheme not in ("http", "https"):
        return "must be an http:// or https:// URL"
    if not parts.hostname:
        return "names no host"
    if parts.username is not None or parts.password is not None or "@" in parts.netloc:
        return "must not hold a user name or password (they would be committed and printed with the recipe)"
    if parts.query or parts.fragment or url.strip().endswith(("?", "#")):
        return "must not have a query or a fragment (the store's paths ac/<key> and cas/<sha256> are appended)"
    if port == 0:
        return "names port 0"
    return None


def table_root(table: Any, base_dir: Path) -> Path | None:
    """The store folder the table names (relative to the recipe's folder, `~` expanded), or None when it names none."""
    if table is None or not table.path:
        return None
    return (Path(base_dir) / os.path.expanduser(table.path)).absolute()


def table_key_file(table: Any, base_dir: Path) -> Path | None:
    """The signing key file the table names (relative to the recipe's folder, `~` expanded), or None."""
    if table is None or not table.signing_key_file:
        return None
    return (Path(base_dir) / os.path.expanduser(table.signing_key_file)).absolute()


def env_store_root() -> Path | None:
    """The folder `TRTLS_STORE` names (`~` expanded, absolute), or None when it names none or says `off`: what a
    recipe with no `[store]` table uses (store.config), judged as `[store] path` is (`store_path_findings`)."""
    env = os.environ.get("TRTLS_STORE", "").strip()
    if not env or env.lower() == "off":
        return None
    return Path(os.path.expanduser(env)).absolute()


def store_path_findings(loaded: LoadedRecipe, recipe: RecipeFile) -> list[Finding]:
    """The store folder this recipe uses, judged like any write (`fs.store_root`): never a system or home folder,
    the recipe's folder or one above it, `.trtls`, a folder holding a model or an output of the recipe, a non-empty
    folder trtls did not make a store (TRT339), or one others can write beyond `trust` (TRT340). One rule for
    both ways of naming it: `[store] path` (located on the value) and, for a recipe with no `[store]` table,
    `TRTLS_STORE` (located on the recipe: the environment names it, and a build would make it a store and sweep
    it just the same)."""
    from trtls.core.write_policy import write_plan
    from trtls.fs.store_root import content_problem, env_trust, placement_problem, root_problem

    table = recipe.store
    root: Path | None
    where: tuple[str, ...]
    if table is not None:
        root, trust, said, where = (
            table_root(table, loaded.base_dir),
            str(table.trust),
            "[store] path",
            ("store", "path"),
        )
        if table.mode == "off":
            return []
    else:
        root, trust, said, where = env_store_root(), env_trust(), "TRTLS_STORE", ()
    if root is None:
        return []
    plan = write_plan(loaded, recipe)
    files = [*plan.protected, *(placed for w, placed in plan.writes if not w.folder)]
    why = placement_problem(root, loaded.base_dir, files)
    code = "TRT339"
    if why is None and (why := content_problem(root)) is not None and why.endswith(" is not a folder"):
        code = "TRT330"  # the store's own code for a path that names a file (one rule, one code, whoever finds it)
    if why is None:
        why, code = root_problem(root, trust=trust), "TRT340"
    if why is None:
        return []
    return [Finding(code, Severity.error, f"{said}: {why}", where, Origin.recipe, bool(where), {})]
