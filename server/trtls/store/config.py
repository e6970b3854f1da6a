"""Where the engine store is and how a build may use it: the recipe's `[store]` table, else the `TRTLS_STORE`
environment variable (a folder, or `off`), else the per-user cache folder `$XDG_CACHE_HOME/trtls/store`
(`~/.cache/trtls/store`).

Whom a store's writers are trusted as (`trust`, `fs.store_root`): the recipe's `[store] trust`, else
`TRTLS_STORE_TRUST`, else `user` (only this user or root may have written it). The team's signing key
(`store.signing`): the recipe's `[store] signing_key_file`, else `TRTLS_STORE_KEY_FILE`, else none."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trtls.core.paths import user_cache_dir
from trtls.core.store_table import env_store_root, parse_size, table_key_file, table_root
from trtls.fs.store_root import env_trust
from trtls.store.signing import key_file

DEFAULT_MAX_SIZE = 20 * 1024**3  # 20 GiB: a few hundred engines of the usual size


@dataclass(frozen=True)
class StoreConfig:
    path: Path
    mode: str  # read_write | read
    max_size: int
    source: str  # "recipe", "TRTLS_STORE", "default": said in the evidence
    trust: str = "user"  # user | group: who may have written the store (fs.store_root.trust_problem)
    recipe_dir: Path | None = None  # the recipe's folder: a store is never it or a folder above it
    signing_key_file: Path | None = None  # the team's key: entries are signed and verified (store.signing)
    remote: str | None = None  # a remote store's URL (store/remote.py): a local miss is looked up there


def default_store_path() -> Path:
    """`$XDG_CACHE_HOME/trtls/store`, else `~/.cache/trtls/store` (core.paths.user_cache_dir: a relative
    XDG_CACHE_HOME is ignored)."""
    return user_cache_dir() / "store"


def store_config(table: Any, base_dir: Path) -> StoreConfig | None:
    """The store a build of this recipe uses, or None when it is off. `table` is the recipe's `[store]` model."""
    base = Path(base_dir).absolute()
    trust = env_trust()
    if table is not None:
        if table.mode == "off":
            return None
        size = parse_size(table.max_size) if table.max_size is not None else DEFAULT_MAX_SIZE
        path = table_root(table, base) or default_store_path()
        key = table_key_file(table, base) or key_file(None)
        remote = table.remote or remote_url()
        return StoreConfig(path, table.mode, size or DEFAULT_MAX_SIZE, "recipe", table.trust, base, key, remote)
    if os.environ.get("TRTLS_STORE", "").strip().lower() == "off":
        return None
    named = env_store_root()  # judged for the recipe as `[store] path` is (core.store_table.store_path_findings)
    if named is not None:
        return StoreConfig(
            named, "read_write", DEFAULT_MAX_SIZE, "TRTLS_STORE", trust, base, key_file(None), remote_url()
        )
    return StoreConfig(
        default_store_path(), "read_write", DEFAULT_MAX_SIZE, "default", trust, base, key_file(None), remote_url()
    )


def remote_url() -> str | None:
    """TRTLS_STORE_REMOTE: a remote store's URL, when the recipe names none."""
    return os.environ.get("TRTLS_STORE_REMOTE", "").strip() or None
