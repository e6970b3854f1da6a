"""The one escape for every human-facing line (issue 27, item 13).

A name a recipe, a model, a record or TensorRT's log carries can hold escape sequences that clear the screen, print
fake success lines, set the window title or write the clipboard (OSC 52). Every line trtls prints for a person --
the terminal views, the log relay, every CLI message -- goes through `terminal_safe`; `--json` output is escaped
by the JSON encoder instead.
"""

from __future__ import annotations


def _is_bidi_control(code: int) -> bool:
    return 0x202A <= code <= 0x202E or 0x2066 <= code <= 0x2069 or code in (0x200E, 0x200F, 0x061C)


def _unsafe(code: int) -> bool:
    return code < 0x20 or code == 0x7F or 0x80 <= code < 0xA0 or 0xD800 <= code <= 0xDFFF or _is_bidi_control(code)


def terminal_safe(text: object, *, keep_newlines: bool = True) -> str:
    """`text` with every control character, ANSI/OSC escape introducer, C1 control, bidi override and lone
    surrogate written as a visible `\\xNN`/`\\uNNNN`; newlines (and tabs) we put in stay when `keep_newlines`."""
    s = text if isinstance(text, str) else str(text)
    if not any(_unsafe(ord(ch)) for ch in s):
        return s  # the common case: nothing to escape, no copy
    out = []
    for ch in s:
        code = ord(ch)
        if (keep_newlines and ch in "\n\t") or not _unsafe(code):
            out.append(ch)
        else:
            out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")
    return "".join(out)
