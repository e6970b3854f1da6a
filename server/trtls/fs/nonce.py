"""The per-run nonce: the secret a supervisor puts in the environment of the one process it starts for a run, and
the proof `kill.prove` asks of a live pid before a record may aim a signal at it (see `kill`'s module doc). Its own
module, on nothing but `os`, because a certain build's entry starts its worker with it before anything else
(builds/supervisor/worker_launch.py)."""

from __future__ import annotations

import os

NONCE_ENV = "TRTLS_RUN_NONCE"  # the per-run secret a supervisor passes to the one process it starts for a run


def new_nonce() -> str:
    return os.urandom(16).hex()  # what secrets.token_hex(16) returns, without importing secrets (random, hmac, base64)
