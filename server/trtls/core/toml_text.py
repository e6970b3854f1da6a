"""TOML text trtls writes into a person's recipe (an import's table, an editor's quick fix): a value written as one
valid TOML value, whatever it carries. A string is written as a basic string: `"` and `\\` escaped, every control
character TOML forbids raw (all but tab, U+007F included) as `\\uXXXX`, and a character outside the BMP as itself —
never a JSON surrogate pair (`\\ud83d\\ude00`), which TOML refuses."""

from __future__ import annotations

import json


def toml_string(text: str) -> str:
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")
