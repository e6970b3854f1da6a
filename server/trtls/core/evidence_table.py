"""`[evidence]` in trtls.toml: how much build evidence `.trtls/` keeps (docs/reliability.md, "Retention").

Runs a record still points to are never removed whatever the bounds say: the latest run, the last run of each
engine and its last good build, running builds, and every run a gates, route, store or promotion record names
(builds/supervisor/retention.py)."""

from __future__ import annotations

from pydantic import BaseModel, Field

from trtls.core.validation import RECIPE_TABLE

DEFAULT_KEEP_RUNS = 50
DEFAULT_MAX_AGE_DAYS = 30.0
DEFAULT_MAX_SIZE_MB = 500.0


class EvidenceTable(BaseModel):
    model_config = RECIPE_TABLE

    keep_runs: int = Field(DEFAULT_KEEP_RUNS, ge=1, description="Newest runs always kept (pinned runs come on top).")
    max_age_days: float = Field(DEFAULT_MAX_AGE_DAYS, gt=0, description="Runs older than this are removed.")
    max_size_mb: float = Field(
        DEFAULT_MAX_SIZE_MB, gt=0, description="Total size of .trtls/runs; the oldest unpinned runs go first."
    )
    auto_gc: bool = Field(True, description="After each build, remove what the bounds allow (at most a few runs).")
