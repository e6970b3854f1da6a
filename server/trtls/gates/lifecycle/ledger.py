"""The promotion ledger, `trtls.promotions.jsonl` beside the recipe: one JSON record a line, never edited.

Each record carries `prev_sha256`, the sha256 of the previous line's bytes (the first: 64 zeros), and
`record_sha256`, the sha256 of its own canonical JSON without that field. A line changed, removed or inserted breaks
the chain at the next record (or, for the last line, its own `record_sha256`), and `read_ledger` says where: the
ledger is then `tampered` and nothing is appended to it. (Without a signing key this detects edits, not a forger who
recomputes every digest: commit the ledger and review its diffs like the lock file.)

Appending rewrites the whole file atomically (temp file, fsync, rename: `trtls.fs`, inside the recipe's real folder,
never through a symlink) under an exclusive lock on `.trtls/promotions.lock` (opened O_NOFOLLOW: a link planted at
its name is refused, never truncated), so a reader sees the old ledger or the new one, and two promotions never
interleave. The ledger is read bounded and only as a regular file: a FIFO or a symlink planted at its name is
`tampered`, never waited on or followed.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trtls.core.paths import real
from trtls.core.write_policy import LEDGER_FILE
from trtls.fs import Kind, atomic_write_bytes, ensure_folder, held_lock, parse_json, read_bytes

LEDGER_NAME = LEDGER_FILE  # beside the recipe; the write policy protects it from every other write
LEDGER_FORMAT = "trtls.promotion/1"
GENESIS = "0" * 64
LEDGER_LIMIT = 256 * 1024 * 1024  # ~1 KiB a record: a quarter of a million promotions


class LedgerTampered(Exception):
    """The ledger's chain is broken: the message names the line."""


def tampered_text(problem: object) -> str:
    """How every face says the chain is broken (promote, canary, rollback refuse; status and a gates run report it)."""
    return f"the promotion ledger is tampered: {problem}"


@dataclass
class Ledger:
    path: Path
    records: list[dict[str, Any]] = field(default_factory=list)
    lines: list[bytes] = field(default_factory=list)  # each record's line, without the newline
    problem: str | None = None  # the chain is broken here (then records stop before it)

    @property
    def head(self) -> str:
        return hashlib.sha256(self.lines[-1]).hexdigest() if self.lines else GENESIS

    def for_route(self, route: str) -> list[dict[str, Any]]:
        return [r for r in self.records if r.get("route") == route]


def ledger_path(recipe_dir: Path) -> Path:
    return Path(recipe_dir) / LEDGER_NAME


def record_digest(record: dict[str, Any]) -> str:
    body = {k: v for k, v in record.items() if k != "record_sha256"}
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def read_ledger(recipe_dir: Path) -> Ledger:
    """The ledger with its chain verified (an absent file is an empty ledger). On a broken chain, `problem` says
    where and `records` holds only the records before it."""
    path = ledger_path(recipe_dir)
    ledger = Ledger(path)
    try:
        data = read_bytes(path, limit=LEDGER_LIMIT, follow=False)
    except FileNotFoundError:
        return ledger
    except OSError as exc:
        ledger.problem = f"{path.name}: cannot be read as trtls's ledger: {exc.strerror or exc}"
        return ledger
    if data and not data.endswith(b"\n"):
        ledger.problem = f"{path.name}: the last line is incomplete (no newline): not written by trtls"
    prev = GENESIS
    for number, line in enumerate(data.splitlines(), 1):
        where = f"{path.name}:{number}"
        try:
            record = parse_json(line)
        except (ValueError, RecursionError):  # RecursionError: a line nested deeper than the parser's stack
            ledger.problem = f"{where}: not a JSON record"
            break
        if not isinstance(record, dict) or record.get("format") != LEDGER_FORMAT:
            ledger.problem = f"{where}: not a {LEDGER_FORMAT} record"
            break
        if record.get("prev_sha256") != prev:
            ledger.problem = (
                f"{where}: the chain is broken: this record names previous line sha256 "
                f"{str(record.get('prev_sha256'))[:12]}…, the line before it is {prev[:12]}… (a line was changed, "
                "removed or inserted)"
            )
            break
        if record.get("record_sha256") != record_digest(record):
            ledger.problem = f"{where}: the record was changed after it was written (record_sha256 differs)"
            break
        ledger.records.append(record)
        ledger.lines.append(line)
        prev = hashlib.sha256(line).hexdigest()
    return ledger


@contextlib.contextmanager
def _exclusive(recipe_dir: Path) -> Iterator[None]:
    within = real(recipe_dir)
    lock = Path(recipe_dir) / ".trtls" / "promotions.lock"
    ensure_folder(lock.parent, within=within)
    with held_lock(lock, kind=Kind.evidence, within=within):
        yield


def append_record(recipe_dir: Path, record: dict[str, Any]) -> dict[str, Any]:
    """Chain `record` after the ledger's last line and rewrite the ledger atomically; the record as written.
    Raises LedgerTampered (and writes nothing) when the chain is already broken."""
    with _exclusive(recipe_dir):
        ledger = read_ledger(recipe_dir)
        if ledger.problem is not None:
            raise LedgerTampered(ledger.problem)
        full = {"format": LEDGER_FORMAT, "seq": len(ledger.records) + 1, **record, "prev_sha256": ledger.head}
        full["record_sha256"] = record_digest(full)
        line = json.dumps(full, sort_keys=True, separators=(",", ":")).encode()
        data = b"".join(x + b"\n" for x in [*ledger.lines, line])
        atomic_write_bytes(ledger.path, data, kind=Kind.route_artefact, within=real(recipe_dir))
        return full
