"""`[engines.NAME.triage]`: what `trtls reduce` and the editor's Reduce need to know about an engine's failure.

`fail_regex` is Polygraphy's `--fail-regex` kept in the recipe: what a failure trtls does not classify looks like
(an API usage error, a compiler message without an error code), so a reduction of it needs no flag each time. A
pattern that does not compile is a recipe error (TRT102) on its own value, like any other wrong value.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic_core import PydanticCustomError


class TriageSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    fail_regex: str | list[str] | None = Field(
        None,
        description="What this engine's build failure looks like when trtls does not classify it: `trtls reduce` "
        "and the editor's Reduce count a candidate as still failing when its build fails and its error or log "
        "matches the pattern (Python `re.search`; a list: any of them). An explicit --fail-regex / failRegex wins.",
    )

    @field_validator("fail_regex")
    @classmethod
    def _compiles(cls, value: str | list[str] | None) -> str | list[str] | None:
        for pattern in [value] if isinstance(value, str) else value or []:
            try:
                re.compile(pattern)
            except re.error as exc:
                why = f"not a regular expression: {pattern!r} ({exc})"  # said as it is, without pydantic's prefix
                raise PydanticCustomError("regex", "{why}", {"why": why}) from None
        return value

    def patterns(self) -> list[str]:
        """The patterns as a list (a single string is one pattern)."""
        if self.fail_regex is None:
            return []
        return [self.fail_regex] if isinstance(self.fail_regex, str) else list(self.fail_regex)
