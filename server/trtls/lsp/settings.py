"""Typed settings from `initializationOptions` (the extension forwards them; any client may)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from trtls.core.vocabulary import BuilderPreference


class Settings(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)
    builder_module: BuilderPreference | None = Field(None, alias="builderModule")
    cancel_grace_s: float | None = Field(None, alias="cancelGraceS", gt=0)


class InitOptions(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)
    build_tree: bool = Field(False, alias="buildTree")  # opt in to trtls/buildTree notifications
    settings: Settings = Field(default_factory=Settings)
    # finished runs the server keeps answering for (listBuilds, showEvidence …); older ones' evidence stays on disk
    keep_finished_runs: int = Field(100, alias="keepFinishedRuns", ge=0)


def parse_init_options(raw: object) -> tuple[InitOptions, str | None]:
    """Invalid options fall back to defaults with a message, as jedi-language-server does."""
    if not isinstance(raw, dict):
        return InitOptions(), None
    try:
        return InitOptions.model_validate(raw), None
    except ValidationError as exc:
        return InitOptions(), f"trtls: invalid initializationOptions, using defaults: {exc.errors()[0]['msg']}"
