"""`tomllib.loads` bounded (`bounded_loads`: no recursion out of stack, errors located) and the checks it rests on.
Standard library only and no dataclasses: a CLI build reads its recipe's raw TOML with it before it starts its worker
(builds/supervisor/spawn.py `preload_for`), and everything imported before that spawn delays the build. core.tomlpos
(the source map, the scanner) builds on it; every caller imports these from here."""

from __future__ import annotations

import re
import tomllib
from typing import Any

TomlPath = tuple[str | int, ...]


class TomlSyntaxError(ValueError):
    def __init__(self, message: str, line: int, col: int):
        super().__init__(message)
        self.message = message
        self.line = line  # 0-based
        self.col = col


class TomlTooDeep(TomlSyntaxError):
    """Arrays/tables nested deeper than MAX_DEPTH, or a NUL character in a string (TRT120 / TRT102): refused before
    anything recursive sees the document. `path` is the data path that crosses the limit, when known."""

    def __init__(self, message: str, line: int, col: int, path: TomlPath = (), code: str = "TRT120"):
        super().__init__(message, line, col)
        self.path = path
        self.code = code


MAX_DEPTH = 64  # a recipe needs ~10 levels; tomllib recurses ~4 frames a level and dies near 250
# What can open or close a level, and what hides brackets from it (strings, comments), in one linear pass.
_NESTING_TOKEN = re.compile(
    r'"""(?:[^"\\]|\\.|"(?!""))*"""+|\'\'\'.*?\'\'\'+|"(?:[^"\\\n]|\\.)*"|\'[^\'\n]*\'|#[^\n]*|[\[\]{}]',
    re.S,
)


def nesting_error(text: str, limit: int = MAX_DEPTH) -> TomlTooDeep | None:
    """The first place where `text` nests arrays or inline tables deeper than `limit`, found without parsing (so
    without recursion); None when it does not. The language server calls this before handing text to tomllib."""
    depth = 0
    for m in _NESTING_TOKEN.finditer(text):
        ch = m.group()
        if ch in "[{":
            depth += 1
            if depth > limit:
                line = text.count("\n", 0, m.start())
                col = m.start() - (text.rfind("\n", 0, m.start()) + 1)
                return TomlTooDeep(f"arrays or tables nested deeper than {limit} levels", line, col)
        elif ch in "]}":
            depth = max(0, depth - 1)
    return None


def data_problem(data: Any, limit: int = MAX_DEPTH) -> tuple[TomlPath, str, str] | None:
    """(path, code, message) of the first value nested deeper than `limit` (dotted keys and [a.b.c] headers nest
    without brackets) or holding a NUL character; None when the data is fine. Iterative: no recursion."""
    stack: list[tuple[TomlPath, Any]] = [((), data)]
    while stack:
        path, value = stack.pop()
        if len(path) > limit:
            return path[: limit + 1], "TRT120", f"values nested deeper than {limit} levels"
        if isinstance(value, dict):
            for k, v in value.items():
                if "\0" in k:
                    return path + (k,), "TRT102", "a key contains a NUL character"
                stack.append((path + (k,), v))
        elif isinstance(value, list):
            stack.extend((path + (i,), v) for i, v in enumerate(value))
        elif isinstance(value, str) and "\0" in value:
            return path, "TRT102", "the string contains a NUL character"
    return None


def bounded_loads(text: str, limit: int = MAX_DEPTH) -> dict:
    """`tomllib.loads` that cannot recurse out of stack: TomlTooDeep (located) for nesting deeper than `limit`,
    TomlSyntaxError (located) for bad TOML."""
    too_deep = nesting_error(text, limit)
    if too_deep is not None:
        raise too_deep
    try:
        return tomllib.loads(text)
    except RecursionError:  # a construct the pre-scan did not count: still an answer, never a traceback
        raise TomlTooDeep(f"arrays or tables nested deeper than {limit} levels", 0, 0) from None
    except tomllib.TOMLDecodeError as exc:
        raise _syntax_error(exc) from None


def _syntax_error(exc: tomllib.TOMLDecodeError) -> TomlSyntaxError:
    line: int | None = getattr(exc, "lineno", None)
    col: int | None = getattr(exc, "colno", None)
    msg = getattr(exc, "msg", str(exc))
    if line is None:  # Python < 3.14 only puts the location in the text
        m = re.search(r"\(at line (\d+), column (\d+)\)", str(exc))
        line, col = (int(m.group(1)), int(m.group(2))) if m else (1, 1)
        msg = str(exc).split(" (at line")[0]
    return TomlSyntaxError(msg, line - 1, max((col or 1) - 1, 0))
