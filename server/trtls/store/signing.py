"""Entry signatures for a team's store (issue 27, item 12): who holds the team's key is who may publish.

A store others can write (a team's shared mount, `trust = "group"`) is only as trustworthy as everyone who can
write it. With a signing key (`[store] signing_key_file`, or `TRTLS_STORE_KEY_FILE`), every entry a build publishes
carries an HMAC-SHA256 of its whole record (key, the key's parts, the engine's sha256 and size, the build) under
that key, and an entry whose signature is missing or wrong is never used: forging one takes the key, not only
write access to the folder. The restore then checks the engine's bytes against the signed sha256. HMAC is
symmetric — every key holder can sign — so the key file is for the builders a team trusts (CI, the farm), kept
readable by them only; consumers that only read need it too, to verify."""

from __future__ import annotations

import errno
import hashlib
import hmac
import json
import os
from pathlib import Path
from typing import Any

from trtls.core.protocol import stable_json
from trtls.fs import parse_json, read_bytes

KEY_ENV = "TRTLS_STORE_KEY_FILE"
KEY_LIMIT = 4096  # a key file holds one secret
MIN_KEY = 32  # bytes of secret: 256 bits, as HMAC-SHA256's own strength


def key_file(configured: str | os.PathLike[str] | None) -> Path | None:
    """The signing key file a store uses: the recipe's, else the environment's, else none."""
    if configured:
        return Path(configured)
    env = os.environ.get(KEY_ENV, "").strip()
    return Path(os.path.expanduser(env)) if env else None


def read_key(path: Path) -> bytes:
    """The secret in `path` (surrounding whitespace dropped): a regular file of at most 4 KiB holding at least 32
    bytes. Raises OSError saying why not."""
    secret = read_bytes(path, limit=KEY_LIMIT, follow=True).strip()
    if len(secret) < MIN_KEY:
        raise OSError(
            errno.EINVAL, f"holds {len(secret)} bytes of secret; a signing key needs at least {MIN_KEY}", str(path)
        )
    return secret


def _message(record: dict[str, Any]) -> bytes:
    """What is signed: the record as it reads back from entry.json, without its signature."""
    as_read = parse_json(json.dumps({k: v for k, v in record.items() if k != "signature"}, default=str))
    return stable_json(as_read).encode("utf-8")


def sign(record: dict[str, Any], secret: bytes) -> str:
    return "hmac-sha256:" + hmac.new(secret, _message(record), hashlib.sha256).hexdigest()


def signed_by(record: dict[str, Any], secret: bytes) -> bool:
    """Whether `record` carries a valid signature under `secret` (compared in constant time)."""
    got = record.get("signature")
    return isinstance(got, str) and hmac.compare_digest(got, sign(record, secret))
