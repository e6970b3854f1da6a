"""`[engines.NAME.triage]`: what `trtls reduce` and the editor's Reduce need to know about an engine's failure.

`fail_regex` is Polygraphy's `--fail-regex` kept in the recipe: what a failure trtls does not classify looks like
(an API usage error, a compiler message without an error code), so a reduction of it needs no flag each time. A
pattern that does not compile is a recipe error (TRT102) on its own value, like any other wrong value; so is one that
repeats an unbounded repeat (`(a+)+`, `(.*x){20}`): Python's `re` backtracks through it for exponential time on a
text that almost matches, and a reduction matches its patterns against every trial's failure text, on the loop that
also serves Stop. `pattern_problem` is the one rule; the recipe, `--fail-regex` and the editor's failRegex all ask it.
"""

from __future__ import annotations

import re
import re._constants as sre_constants  # type: ignore[import-not-found]  # the parsed pattern's node kinds (3.11+)
import re._parser as sre_parser  # type: ignore[import-not-found]
from typing import Any

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
            why = pattern_problem(pattern)
            if why is not None:  # said as it is, without pydantic's prefix
                raise PydanticCustomError("regex", "{why}", {"why": why}) from None
        return value

    def patterns(self) -> list[str]:
        """The patterns as a list (a single string is one pattern)."""
        if self.fail_regex is None:
            return []
        return [self.fail_regex] if isinstance(self.fail_regex, str) else list(self.fail_regex)


def pattern_problem(pattern: str) -> str | None:
    """Why `pattern` cannot be a failure pattern (it does not compile, or it repeats an unbounded repeat), or None."""
    try:
        re.compile(pattern)
        nested = _repeats_a_repeat(sre_parser.parse(pattern))
    except re.error as exc:
        return f"not a regular expression: {pattern!r} ({exc})"
    except RecursionError:  # Python's own parser gives up on groups nested hundreds deep
        return f"{pattern[:60]!r}… nests its groups too deeply to be compiled and checked"
    if nested:
        return (
            f"{pattern!r} repeats an unbounded repeat (like `(a+)+`): on a failure text that almost matches, Python's "
            "re can take hours; make the inner repeat possessive (`a++`) or atomic (`(?>a+)`), or drop the nesting"
        )
    return None


_BACKTRACKING = (sre_constants.MAX_REPEAT, sre_constants.MIN_REPEAT)


def _parts(av: Any) -> list[Any]:
    """The sub-patterns a parsed node holds (a group's body, a branch's alternatives, a repeat's body)."""
    if isinstance(av, sre_parser.SubPattern):
        return [av]
    if isinstance(av, (tuple, list)):
        return [part for item in av for part in _parts(item)]
    return []


def _has_unbounded(items: Any) -> bool:
    """Whether a backtracking `*`, `+` or `{n,}` is somewhere in `items` (an atomic group or a possessive repeat
    gives nothing back, so what it holds cannot blow up)."""
    for op, av in items:
        if op is sre_constants.ATOMIC_GROUP or op is sre_constants.POSSESSIVE_REPEAT:
            continue
        if op in _BACKTRACKING and av[1] is sre_constants.MAXREPEAT:
            return True
        if any(_has_unbounded(part) for part in _parts(av)):
            return True
    return False


def _repeats_a_repeat(items: Any) -> bool:
    """Whether a backtracking repeat of more than one (`+`, `*`, `{2,}`, `{20}`) holds an unbounded one."""
    for op, av in items:
        if op in _BACKTRACKING and av[1] != 1 and _has_unbounded(av[2]):
            return True
        if any(_repeats_a_repeat(part) for part in _parts(av)):
            return True
    return False
