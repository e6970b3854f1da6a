"""The one escape for every human-facing line (issue 27, item 13).

A name a recipe, a model, a record or TensorRT's log carries can hold escape sequences that clear the screen, print
fake success lines, set the window title or write the clipboard (OSC 52). Every line trtls prints for a person --
the terminal views, the log relay, every CLI message -- goes through `terminal_safe`; `--json` output is escaped
by the JSON encoder instead.
"""

from __future__ import annotations

import re

# every code point `_unsafe` is true for, as one class: the common case (nothing to escape) is one search in C, not a
# Python call per character — every `--json` line of a farm run passes here (16,000 lines of 16 cells: seconds)
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c]")


def _is_bidi_control(code: int) -> bool:
    return 0x202A <= code <= 0x202E or 0x2066 <= code <= 0x2069 or code in (0x200E, 0x200F, 0x061C)


def _unsafe(code: int) -> bool:
    return code < 0x20 or code == 0x7F or 0x80 <= code < 0xA0 or 0xD800 <= code <= 0xDFFF or _is_bidi_control(code)


def terminal_safe(text: object, *, keep_newlines: bool = True) -> str:
    """`text` with every control character, ANSI/OSC escape introducer, C1 control, bidi override and lone
    surrogate written as a visible `\\xNN`/`\\uNNNN`; newlines (and tabs) we put in stay when `keep_newlines`."""
    s = text if isinstance(text, str) else str(text)
    if _UNSAFE.search(s) is None:
        return s  # the common case: nothing to escape, no copy
    out = []
    for ch in s:
        code = ord(ch)
        if (keep_newlines and ch in "\n\t") or not _unsafe(code):
            out.append(ch)
        else:
            out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")
    return "".join(out)
