"""`[store]` in trtls.toml: where built engines are kept and reused (docs/store.md). Paths are checked when a build
uses the store (a located TRT330/TRT331); the size is checked here, as the recipe loads."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

SIZE_TEXT = re.compile(r"^\s*\d+(\.\d+)?\s*(b|k|kb|kib|m|mb|mib|g|gb|gib|t|tb|tib)?\s*$", re.IGNORECASE)


class StoreTable(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

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

    @field_validator("max_size")
    @classmethod
    def _size(cls, v: int | str | None) -> int | str | None:
        if v is None:
            return v
        if isinstance(v, int) and v <= 0:
            raise ValueError("max_size must be a positive number of bytes")
        if isinstance(v, str) and not SIZE_TEXT.match(v):
            raise ValueError('max_size must be a size such as "20 GiB", "500 MB" or a number of bytes')
        return v
