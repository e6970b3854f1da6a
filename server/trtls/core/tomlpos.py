"""Source ranges for every key and value of a TOML document.

`tomllib` gives values but no positions, and every trtls error must point at the exact key or value
that caused it (a diagnostic range, a `file:line:col`). So the text is parsed twice: by tomllib for the
values (it is the authority on syntax), then by this small scanner for positions. The scanner only
runs on text that tomllib accepted, which keeps it short: it never has to report a syntax error.

Paths are tuples of keys and array indexes: `("engines", "demo", "profiles", 0, "min", 2)`.
Ranges are 0-based (line, character) pairs, end exclusive, as LSP wants; `Range.human()` is 1-based.
"""

from __future__ import annotations

import bisect
import tomllib
from dataclasses import dataclass, field
from typing import Any

from trtls.core.toml_bounded import (
    TomlPath,
    TomlTooDeep,
    bounded_loads,
    data_problem,
)


@dataclass(frozen=True)
class Range:
    start_line: int
    start_col: int
    end_line: int
    end_col: int

    def human(self) -> str:
        return f"{self.start_line + 1}:{self.start_col + 1}"

    def contains(self, line: int, col: int) -> bool:
        return (self.start_line, self.start_col) <= (line, col) <= (self.end_line, self.end_col)


@dataclass
class Span:
    key: Range  # the key itself, or the whole `[table]` header
    value: Range | None = None  # None for tables


@dataclass
class SourceMap:
    spans: dict[TomlPath, Span] = field(default_factory=dict)
    tables: list[tuple[int, TomlPath]] = field(default_factory=list)  # (header line, path), in file order

    def span(self, path: TomlPath) -> Span | None:
        return self.spans.get(tuple(path))

    def range(self, path: TomlPath, on_value: bool = False) -> Range:
        """The range of `path`, or of its nearest ancestor that exists (a missing key → its table)."""
        path = tuple(path)
        while path:
            span = self.spans.get(path)
            if span is not None:
                if on_value and span.value is not None:
                    return span.value
                return span.key
            path = path[:-1]
        return Range(0, 0, 0, 0)

    def table_at(self, line: int) -> TomlPath:
        """The table whose body holds `line` (for completion and hover)."""
        current: TomlPath = ()
        for header_line, path in self.tables:
            if header_line > line:
                break
            current = path
        return current

    def path_at(self, line: int, col: int) -> tuple[TomlPath, bool] | None:
        """The deepest key or value under the cursor: (path, is_value)."""
        best: tuple[TomlPath, bool] | None = None
        for path, span in self.spans.items():
            for is_value, rng in ((False, span.key), (True, span.value)):
                if rng is not None and rng.contains(line, col):
                    if best is None or len(path) > len(best[0]):
                        best = (path, is_value)
        return best


def parse(text: str) -> tuple[dict, SourceMap]:
    """Values (tomllib) and positions (this scanner); raises TomlSyntaxError with a location (TomlTooDeep for a
    document nested too deep or holding a NUL character, located on the value that does)."""
    data = bounded_loads(text)
    smap = _Scanner(text).scan()
    problem = data_problem(data)
    if problem is not None:
        path, code, message = problem
        rng = smap.range(path, True)
        raise TomlTooDeep(message, rng.start_line, rng.start_col, path, code)
    return data, smap


_BARE = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
_SCALAR_END = set(",]}\n#")


class _Scanner:
    def __init__(self, text: str):
        self.s = text
        self.i = 0
        self.line_starts = [0] + [n + 1 for n, ch in enumerate(text) if ch == "\n"]
        self.map = SourceMap()
        self.aot_count: dict[TomlPath, int] = {}

    # -- positions -----------------------------------------------------------------------------
    def pos(self, offset: int) -> tuple[int, int]:
        line = bisect.bisect_right(self.line_starts, offset) - 1
        return line, offset - self.line_starts[line]

    def rng(self, a: int, b: int) -> Range:
        return Range(*self.pos(a), *self.pos(b))

    # -- lexing helpers ------------------------------------------------------------------------
    def peek(self, n: int = 1) -> str:
        return self.s[self.i : self.i + n]

    def skip_ws(self, newlines: bool = False) -> None:
        while self.i < len(self.s):
            ch = self.s[self.i]
            if ch in " \t\r" or (newlines and ch == "\n"):
                self.i += 1
            elif ch == "#":
                while self.i < len(self.s) and self.s[self.i] != "\n":
                    self.i += 1
            else:
                return

    def string(self) -> str:
        s = self.s
        for quote in ('"""', "'''"):
            if s.startswith(quote, self.i):
                end = s.index(quote, self.i + 3)
                while s.startswith(quote[0], end + 3):  # up to two quotes may close the string
                    end += 1
                raw = s[self.i + 3 : end]
                self.i = end + 3
                return raw
        quote = s[self.i]
        j = self.i + 1
        while s[j] != quote:
            j += 2 if (quote == '"' and s[j] == "\\") else 1
        raw = s[self.i : j + 1]
        self.i = j + 1
        return tomllib.loads(f"k = {raw}")["k"] if quote == '"' else raw[1:-1]

    def key(self) -> list[str]:
        parts: list[str] = []
        while True:
            self.skip_ws()
            if self.peek() in ('"', "'"):
                parts.append(self.string())
            else:
                j = self.i
                while self.i < len(self.s) and self.s[self.i] in _BARE:
                    self.i += 1
                parts.append(self.s[j : self.i])
            self.skip_ws()
            if self.peek() == ".":
                self.i += 1
                continue
            return parts

    def resolve(self, keys: TomlPath) -> TomlPath:
        """A header's keys as a data path: a prefix that names an array of tables points into its latest
        element (`[[a.b]]` after the second `[[a]]` is under a[1], not a[0])."""
        out: TomlPath = ()
        for n, key in enumerate(keys):
            out = out + (key,)
            if n < len(keys) - 1 and out in self.aot_count:
                out = out + (self.aot_count[out] - 1,)
        return out

    # -- grammar -------------------------------------------------------------------------------
    def scan(self) -> SourceMap:
        table: TomlPath = ()
        while True:
            self.skip_ws(newlines=True)
            if self.i >= len(self.s):
                return self.map
            start = self.i
            if self.peek(2) == "[[":
                self.i += 2
                base = self.resolve(tuple(self.key()))
                self.i += 2  # ]]
                index = self.aot_count.get(base, 0)
                self.aot_count[base] = index + 1
                table = base + (index,)
                header = self.rng(start, self.i)
                self.map.spans.setdefault(base, Span(header))
                self.map.spans[table] = Span(header)
                self.map.tables.append((header.start_line, table))
            elif self.peek() == "[":
                self.i += 1
                table = self.resolve(tuple(self.key()))
                self.i += 1  # ]
                header = self.rng(start, self.i)
                self.map.spans[table] = Span(header)
                self.map.tables.append((header.start_line, table))
            else:
                self.key_value(table)

    def key_value(self, prefix: TomlPath) -> None:
        self.skip_ws()
        k0 = self.i
        keys = self.key()
        k1 = self.i
        while k1 > k0 and self.s[k1 - 1] in " \t":
            k1 -= 1
        self.skip_ws()
        self.i += 1  # =
        self.skip_ws()
        path = prefix + tuple(keys)
        v0 = self.i
        self.value(path)
        self.map.spans[path] = Span(self.rng(k0, k1), self.rng(v0, self.i))

    def value(self, path: TomlPath) -> None:
        ch = self.peek()
        if ch in ('"', "'"):
            self.string()
        elif ch == "[":
            self.i += 1
            index = 0
            while True:
                self.skip_ws(newlines=True)
                if self.peek() == "]":
                    self.i += 1
                    return
                v0 = self.i
                self.value(path + (index,))
                item = self.rng(v0, self.i)
                self.map.spans[path + (index,)] = Span(item, item)
                index += 1
                self.skip_ws(newlines=True)
                if self.peek() == ",":
                    self.i += 1
        elif ch == "{":
            self.i += 1
            while True:
                self.skip_ws()
                if self.peek() == "}":
                    self.i += 1
                    return
                self.key_value(path)
                self.skip_ws()
                if self.peek() == ",":
                    self.i += 1
        else:
            j = self.i
            while self.i < len(self.s) and self.s[self.i] not in _SCALAR_END:
                self.i += 1
            while self.i > j and self.s[self.i - 1] in " \t\r":
                self.i -= 1


def apply_edits(text: str, edits: list[dict[str, Any]]) -> str:
    """`text` with the text edits (`range` = [line, col, end line, end col], 0-based, non-overlapping; `newText`)
    applied, last first: what an editor does with a finding's `fix`, for a check of the recipe it would leave."""
    lines = text.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))

    def offset(line: int, col: int) -> int:
        return starts[min(line, len(lines))] + col

    out = text
    for e in sorted(edits, key=lambda e: (e["range"][0], e["range"][1]), reverse=True):
        a, b = offset(*e["range"][:2]), offset(*e["range"][2:])
        out = out[:a] + e["newText"] + out[b:]
    return out
