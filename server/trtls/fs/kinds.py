"""The declared kinds of file trtls writes, each with its own rule for replacing and deleting.

A write or delete names its kind; the rule is the kind's, not the call site's. `deletable` is the pattern a
name must match before the door removes it: a delete can only ever take a name trtls itself makes (a run id, a
64-hex store key, a temp mark), so a misconfigured folder (`[store] path = "."`) loses nothing of the user's.
"""

from __future__ import annotations

import enum
import re

OWNED_MARK = ".trtls-owned"  # written in every folder trtls creates to hold its own files (store, scratch)
TEMP_MARK = ".trtls-tmp-"  # engine temp files carry this mark; orphan scans look for it

_HEX64 = r"[0-9a-f]{64}"
_RUN_ID = r"[A-Za-z0-9_.-]{1,200}"
_TEMP = r"(?:\..+\.[0-9a-f]{8}\.tmp|.+\.trtls-tmp-[A-Za-z0-9_.-]+)"
ENGINE_MAGIC = (b"vtrt", b"ftrt")  # a serialized plan's first bytes: TensorRT-RTX, full TensorRT
ENGINE_HEAD = 16  # bytes of an existing output read to judge it (and, escaped, shown when it is refused)


class Kind(enum.Enum):
    """(value, deletable-name pattern, replace): replace says whether an existing file may be replaced at all
    ("format": only an empty file, or what the caller's `may_replace` proves — a report trtls wrote, see
    `fs.write.write_report`; "engine": only a TensorRT engine or an empty file, `engine_replace_refusal`)."""

    engine_output = ("engine output", _TEMP, "engine")  # placed and judged by core.write_policy when the recipe loads
    evidence = ("evidence", rf"{_RUN_ID}|{_TEMP}", "yes")  # .trtls/: runs, history, known-good records, locks
    store_entry = (
        "store entry",
        rf"{_HEX64}(?:\.[a-z]+)?|{_HEX64}\.[0-9a-f]{{8,32}}|{_HEX64}-[0-9]{{8}}-[0-9]{{6}}-[0-9]+|{_TEMP}|tmp-.+",
        "yes",
    )  # `<key>-YYYYmmdd-HHMMSS-<pid>`: a quarantined entry (store/folder.py), pruned by `trtls store gc`
    store_lock = ("store lock", rf"{_HEX64}\.lock", "yes")
    store_stats = ("store statistics", r"[0-9]{4}-[0-9]{2}-[0-9]{2}\.[0-9]{1,10}\.jsonl", "yes")  # <day>.<uid>.jsonl
    report = ("report", _TEMP, "format")  # `-o` files: SARIF, JUnit, HTML, JSON, traces, schemas
    route_artefact = ("route artefact", rf"{_TEMP}|[A-Za-z0-9_.-]+", "yes")  # bundles, exports (route rule first)
    cache = ("cache", rf"{_TEMP}|[A-Za-z0-9_.-]+", "yes")  # timing caches, digest caches, tool caches
    scratch = ("scratch", r".+", "yes")  # folders trtls made for itself (mkdtemp); marked OWNED_MARK
    generated = ("generated document", _TEMP, "yes")  # the protocol's generated documents in this repository
    farm_state = ("farm state", rf"{_TEMP}|[A-Za-z0-9_.-]+", "yes")  # the farm's address, token, pid files

    def __init__(self, label: str, deletable: str, replace: str) -> None:
        self.label = label
        self.deletable = re.compile(deletable)
        self.replace = replace

    def may_delete(self, name: str) -> bool:
        return name not in ("", ".", "..", OWNED_MARK) and "/" not in name and bool(self.deletable.fullmatch(name))


def engine_replace_refusal(head: bytes | None) -> str | None:
    """The one rule for a file already at an engine output (the door at every engine write, restore and rollback;
    `core.write_policy` when the recipe loads, TRT123): None when an engine may replace it — it is empty, or it starts
    as a serialized TensorRT plan does (a previous engine) — else why not, to follow the path in a message. `head`:
    the file's first `ENGINE_HEAD` bytes, None when it could not be read."""
    if head is not None and (not head or head.startswith(ENGINE_MAGIC)):
        return None
    shown = "cannot be read" if head is None else f"starts with {repr(head[:ENGINE_HEAD])[1:]}"  # escaped, never raw
    return (
        f"already exists and is not a TensorRT engine (it {shown}): trtls replaces only an engine or an empty file "
        "there, so nothing is written; move the file or name another output"
    )
