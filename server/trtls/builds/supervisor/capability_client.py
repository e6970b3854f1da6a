"""Asking TensorRT whether it takes an engine's ONNX, from a process that never imports it.

The question goes to a child (`python -m trtls.builds.worker.capability`): a parser that crashes or spins on a model
ends
that child only, after `TIMEOUT_S` at the latest, and the answer says so (`not_checked`, with the signal or the
timeout) instead of taking the editor's server down. `ask` is for the event loop (an asyncio child: the loop keeps
answering meanwhile), `ask_blocking` for the terminal. Answers are cached by what TensorRT reads: the ONNX's sha256
(through the recipe's digest cache: an unchanged model is stat'ed, not read), the profiles, the settings and the
builder module; `CapabilityCache` keeps the last few.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections import OrderedDict
from pathlib import Path
from typing import Any

from trtls import fs
from trtls.core.build_config import flat_settings
from trtls.core.protocol import stable_json

TIMEOUT_S = 120.0  # a parse of a multi-GB model takes seconds; a child past this is stuck, not slow
CHILD = [sys.executable, "-m", "trtls.builds.worker.capability"]


def capability_request(loaded: Any, eng: Any) -> dict[str, Any]:
    """What the child is asked for an engine (`EngineRecipe`) of a checked recipe: the model, profiles, settings and
    module a build of it would use (the ONNX as the recipe names it: a precision step's output is not there before a
    build)."""
    return {
        "onnx": str(loaded.resolve(eng.onnx)),
        "profiles": eng.job_profiles(),
        "settings": flat_settings(eng.builder),
        "builder_module": eng.builder_module,
    }


def cache_key(request: dict[str, Any], state_dir: Path | None) -> str | None:
    """The key of an answer: the ONNX's sha256 and everything else the child is given; None when the model cannot
    be hashed (missing: the recipe check already says so)."""
    from trtls.store.key import file_sha256

    try:
        digest = file_sha256(Path(request["onnx"]), state_dir)
    except Exception:
        return None
    if digest is None:
        return None
    return stable_json({**request, "onnx": digest})


def _answer_of(returncode: int | None, stdout: bytes, stderr: bytes) -> dict[str, Any]:
    lines = stdout.decode(errors="replace").strip().splitlines()
    if returncode == 0 and lines:
        try:
            answer = json.loads(lines[-1])
        except (ValueError, RecursionError):
            answer = None
        if isinstance(answer, dict):
            return answer
    if returncode is not None and returncode < 0:
        why = f"the TensorRT child ended with signal {-returncode} while reading the model"
    else:
        tail = stderr.decode(errors="replace").strip().splitlines()[-1:] or [f"exit {returncode}"]
        why = f"the TensorRT child gave no answer ({tail[0][:300]})"
    return {"status": "not_checked", "reason": why, "child": "crashed" if (returncode or 0) < 0 else "no_answer"}


async def ask(request: dict[str, Any], timeout_s: float = TIMEOUT_S) -> dict[str, Any]:
    """The child's answer, awaited without blocking the loop; a cancelled await kills the child."""
    proc = await asyncio.create_subprocess_exec(
        *CHILD, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        out, err = await asyncio.wait_for(
            proc.communicate(json.dumps({**request, "timeout_s": timeout_s}).encode()), timeout_s
        )
    except (TimeoutError, asyncio.CancelledError) as exc:
        fs.signal_child(proc)  # our own child, held by this object
        await proc.wait()
        if isinstance(exc, asyncio.CancelledError):
            raise
        return {
            "status": "not_checked",
            "reason": f"the TensorRT child did not answer within {timeout_s:g} s",
            "child": "timeout",
        }
    return _answer_of(proc.returncode, out, err)


def ask_blocking(request: dict[str, Any], timeout_s: float = TIMEOUT_S) -> dict[str, Any]:
    try:
        run = subprocess.run(
            CHILD,
            input=json.dumps({**request, "timeout_s": timeout_s}).encode(),
            capture_output=True,
            timeout=timeout_s,
        )
    except subprocess.TimeoutExpired:
        return {
            "status": "not_checked",
            "reason": f"the TensorRT child did not answer within {timeout_s:g} s",
            "child": "timeout",
        }
    return _answer_of(run.returncode, run.stdout, run.stderr)


def engines_to_ask(findings: list[Any], engines: dict[str, Any]) -> dict[str, Any]:
    """Of `engines` (those whose table validates: `onnx_files.profile_checks.valid_engines`), the ones whose ONNX the
    recipe check found readable (a missing or malformed model is already an error on `onnx`: the parser is not
    asked about it)."""
    blocked = {f.path[1] for f in findings if len(f.path) >= 3 and f.path[2] == "onnx" and f.code != "TRT132"}
    return {name: eng for name, eng in engines.items() if name not in blocked}


class CapabilityCache:
    """The last `size` answers by `cache_key`; a `not_checked` answer from a crash or timeout is kept too (asking
    again would crash again), one from a missing module is not (installing it is the fix)."""

    def __init__(self, size: int = 64) -> None:
        self.size = size
        self._answers: OrderedDict[str, dict[str, Any]] = OrderedDict()

    def get(self, key: str) -> dict[str, Any] | None:
        answer = self._answers.get(key)
        if answer is not None:
            self._answers.move_to_end(key)
        return answer

    def put(self, key: str, answer: dict[str, Any]) -> None:
        if answer.get("status") == "not_checked" and "child" not in answer:
            return
        self._answers[key] = answer
        self._answers.move_to_end(key)
        while len(self._answers) > self.size:
            self._answers.popitem(last=False)
