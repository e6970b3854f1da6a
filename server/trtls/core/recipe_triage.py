r"""`[engines.NAME.triage]`: what `trtls reduce` and the editor's Reduce need to know about an engine's failure.

`fail_regex` is Polygraphy's `--fail-regex` kept in the recipe: what a failure trtls does not classify looks like
(an API usage error, a compiler message without an error code), so a reduction of it needs no flag each time. A
pattern that does not compile is a recipe error (TRT102) on its own value, like any other wrong value; so is one that
matches the empty text (`''`, `.*`, `x*`: it matches every failure, so any failure would "still fail"), one that
repeats an unbounded repeat (`(a+)+`, `(.*x){20}`), and one that repeats a choice two of whose ways can begin on the
same character (`(.|\s)*`: a space is `.` and `\s`; `(a|aa)+`): Python's `re` backtracks through either for
exponential time on a text that almost matches, and a reduction matches its patterns against every trial's failure
text, on the loop that also serves Stop (a Ctrl-C waits for the match). `pattern_problem` is the one rule; the recipe,
`--fail-regex` and the editor's failRegex all ask it.
"""

from __future__ import annotations

import re
import re._constants as sre_constants  # type: ignore[import-not-found]  # the parsed pattern's node kinds (3.11+)
import re._parser as sre_parser  # type: ignore[import-not-found]
from itertools import combinations
from typing import Any

from pydantic import BaseModel, Field, field_validator
from pydantic_core import PydanticCustomError

from trtls.core.validation import RECIPE_TABLE


class TriageSettings(BaseModel):
    model_config = RECIPE_TABLE

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
    """Why `pattern` cannot be a failure pattern (it does not compile, it matches the empty text, or a repeat in it
    can match one text in more than one way), or None."""
    try:
        parsed = sre_parser.parse(pattern)
        re.compile(pattern)
        ambiguous = _repeats_an_ambiguous_choice(
            parsed, frozenset(), bool(parsed.state.flags & sre_constants.SRE_FLAG_DOTALL)
        )
    except re.error as exc:
        return f"not a regular expression: {pattern!r} ({exc})"
    except RecursionError:  # Python's own parser gives up on groups nested hundreds deep
        return f"{pattern[:60]!r}… nests its groups too deeply to be compiled and checked"
    if re.search(pattern, "", re.M) is not None:  # as regex_signature searches: it matches every text
        return (
            f"{pattern!r} matches the empty text, so it matches every failure: any failure at all would count as the "
            "same failure; name what the failure says (a code, a message's words)"
        )
    if ambiguous:
        return (
            f"{pattern!r} repeats something that can match one text in more than one way (like `(a+)+`, "
            "`(\\w+\\s?)+` or `(.|\\s)*`: a choice two of whose ways can begin on the same character, or a repeat "
            "that can stop or go on at the same character): on a failure text that almost matches, Python's re can "
            "take hours; make the inner repeat possessive (`\\w++`) or the group atomic (`(?>\\w+\\s?)+`), or the "
            "ways exclusive (`[^\\n]*`)"
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


# The characters a first-character set is taken over: ASCII and a few others of each category (`\w`, `\s`, `\d`
# beyond ASCII). A set over-approximates what a pattern can begin with (a back-reference: anything).
_ALPHABET = frozenset([chr(i) for i in range(128)] + ["\u00a0", "\u00e9", "\u0660", "\u2028", "\u4e00"])
_CATEGORY = {
    sre_constants.CATEGORY_DIGIT: r"\d",
    sre_constants.CATEGORY_NOT_DIGIT: r"\D",
    sre_constants.CATEGORY_SPACE: r"\s",
    sre_constants.CATEGORY_NOT_SPACE: r"\S",
    sre_constants.CATEGORY_WORD: r"\w",
    sre_constants.CATEGORY_NOT_WORD: r"\W",
}
_ZERO_WIDTH = (sre_constants.AT, sre_constants.ASSERT, sre_constants.ASSERT_NOT)


def _in_set(items: Any) -> frozenset[str]:
    """The characters of `_ALPHABET` a class (`[...]`, `\\s`, `\\d`) matches."""
    negate = False
    chars: set[str] = set()
    for op, av in items:
        if op is sre_constants.NEGATE:
            negate = True
        elif op is sre_constants.LITERAL:
            chars.add(chr(av))
        elif op is sre_constants.RANGE:
            chars.update(c for c in _ALPHABET if av[0] <= ord(c) <= av[1])
        elif op is sre_constants.CATEGORY and av in _CATEGORY:
            chars.update(c for c in _ALPHABET if re.match(_CATEGORY[av], c))
        else:  # a category of another kind (a locale's): any character
            chars.update(_ALPHABET)
    return frozenset(_ALPHABET - chars if negate else chars)


def _first(items: Any, dotall: bool) -> tuple[frozenset[str], bool]:
    """(the characters `items` can begin with, whether they can match the empty text)."""
    out: set[str] = set()
    for op, av in items:
        if op is sre_constants.LITERAL:
            chars, empty = frozenset(chr(av)), False
        elif op is sre_constants.NOT_LITERAL:
            chars, empty = _ALPHABET - {chr(av)}, False
        elif op is sre_constants.ANY:
            chars, empty = (_ALPHABET if dotall else _ALPHABET - {"\n"}), False
        elif op is sre_constants.IN:
            chars, empty = _in_set(av), False
        elif op in _ZERO_WIDTH:
            chars, empty = frozenset(), True
        elif op is sre_constants.SUBPATTERN:
            chars, empty = _first(av[3], dotall or bool(av[1] & sre_constants.SRE_FLAG_DOTALL))
        elif op is sre_constants.BRANCH:
            firsts = [_first(alt, dotall) for alt in av[1]]
            chars, empty = frozenset().union(*(f for f, _ in firsts)), any(e for _, e in firsts)
        elif op in (*_BACKTRACKING, sre_constants.POSSESSIVE_REPEAT):
            chars, body_empty = _first(av[2], dotall)
            empty = av[0] == 0 or body_empty
        elif op is sre_constants.ATOMIC_GROUP:
            chars, empty = _first(av, dotall)
        else:  # a back-reference, a conditional: could begin anywhere, or be empty
            chars, empty = _ALPHABET, True
        out |= chars
        if not empty:
            return frozenset(out), False
    return frozenset(out), True


def _then(items: Any, follow: frozenset[str], dotall: bool) -> frozenset[str]:
    """What `items` and then the text that begins with `follow` can begin with."""
    chars, empty = _first(items, dotall)
    return chars | follow if empty else chars


def _ambiguous(items: Any, follow: frozenset[str], dotall: bool) -> bool:
    """Whether a choice in `items` (followed by text beginning with `follow`) has two ways that can begin on the same
    character: an alternation's branches, or a bounded repeat's "once more" and "stop" (`a?a`). An atomic group or
    a possessive repeat gives nothing back, so its choices are never retried."""
    for index, (op, av) in enumerate(items):
        rest = _then(items[index + 1 :], follow, dotall)
        if op is sre_constants.BRANCH:
            ways = [_then(alt, rest, dotall) for alt in av[1]]
            if any(a & b for a, b in combinations(ways, 2)) or any(_ambiguous(alt, rest, dotall) for alt in av[1]):
                return True
        elif op is sre_constants.SUBPATTERN:
            if _ambiguous(av[3], rest, dotall or bool(av[1] & sre_constants.SRE_FLAG_DOTALL)):
                return True
        elif op in _BACKTRACKING and av[0] != av[1]:
            again = _first(av[2], dotall)[0]
            if again & rest or _ambiguous(av[2], again | rest, dotall):
                return True
    return False


def _repeats_an_ambiguous_choice(items: Any, follow: frozenset[str], dotall: bool) -> bool:
    """Whether a backtracking repeat of more than one holds a choice two of whose ways can begin on the same
    character (`_ambiguous`, with the repeat's own beginning among what can follow its body)."""
    for index, (op, av) in enumerate(items):
        rest = _then(items[index + 1 :], follow, dotall)
        if op in _BACKTRACKING:
            again = _first(av[2], dotall)[0] | rest
            if av[1] != 1 and _ambiguous(av[2], again, dotall):
                return True
            if _repeats_an_ambiguous_choice(av[2], again, dotall):
                return True
        elif op is sre_constants.SUBPATTERN:
            if _repeats_an_ambiguous_choice(av[3], rest, dotall or bool(av[1] & sre_constants.SRE_FLAG_DOTALL)):
                return True
        elif op is sre_constants.BRANCH:
            if any(_repeats_an_ambiguous_choice(alt, rest, dotall) for alt in av[1]):
                return True
    return False
