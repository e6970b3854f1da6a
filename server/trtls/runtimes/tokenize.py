"""Token ids as the runtime side produces them: a command runner (`runtime_options.tokenizer_command`) is given the
texts and reports the ids its tokenizer gave, so gate 4 compares what the deployed runtime really feeds the model
with the reference tokenizer's ids — not the reference library run twice on a copy of the same file.

Protocol (one call per gate run): the command is run from the recipe folder with one extra argument, the path of
a JSON file `{"texts": ["…", …]}`; it must print one JSON object on stdout, `{"ids": [[101, 2023, …], …]}`, one
id list per text in order, and exit 0. Anything else (non-zero exit, timeout, not that JSON) is an error with the
command's stderr tail; nothing it prints is executed or evaluated.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass

from trtls.fs import Kind, atomic_write_text, parse_json, remove_tree, scratch_dir

STDERR_TAIL = 1000


@dataclass
class TokenIds:
    ids: list[list[int]] | None
    error: str | None = None


def runtime_token_ids(command: Sequence[str], texts: Sequence[str], *, cwd: str | None, timeout_s: float) -> TokenIds:
    """The ids `command` reports for `texts` (see the module doc), or why there are none."""
    tmp = scratch_dir(prefix="trtls-tokenize-")
    try:
        request = tmp / "texts.json"
        atomic_write_text(request, json.dumps({"texts": list(texts)}), kind=Kind.scratch, within=tmp)
        try:
            proc = subprocess.run(
                [*command, str(request)],
                cwd=cwd or os.getcwd(),
                capture_output=True,
                timeout=timeout_s,
                check=False,
            )
        except FileNotFoundError as exc:
            return TokenIds(None, f"tokenizer command not found: {exc.filename}")
        except subprocess.TimeoutExpired:
            return TokenIds(None, f"tokenizer command did not answer within {timeout_s:g} s")
        except OSError as exc:
            return TokenIds(None, f"tokenizer command cannot run: {exc}")
    finally:
        with contextlib.suppress(OSError):
            remove_tree(tmp, kind=Kind.scratch, within=tmp.parent)
    tail = proc.stderr.decode("utf-8", "replace")[-STDERR_TAIL:].strip()
    if proc.returncode != 0:
        return TokenIds(None, f"tokenizer command exited {proc.returncode}" + (f": {tail}" if tail else ""))
    try:
        data = parse_json(proc.stdout.decode("utf-8"))
        ids = data["ids"]
        if not (
            isinstance(ids, list)
            and all(
                isinstance(seq, list) and all(isinstance(i, int) and not isinstance(i, bool) for i in seq)
                for seq in ids
            )
        ):
            raise ValueError("'ids' must be a list of lists of integers")
    except (ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
        return TokenIds(None, f'tokenizer command printed no {{"ids": [[…], …]}} object: {exc}')
    return TokenIds(ids)
