"""Gate 4's tokenizer parity: the token ids the runtime under test is fed equal the reference tokenizer's."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from trtls.core.findings import TomlPath
from trtls.core.gate_result import GateCheck, gate_check
from trtls.gates.context import GateContext

GATE = 4

_check = partial(gate_check, GATE)


# ------------------------------------------------------------------------------------------ tokenizer


@dataclass
class TokenizerParity:
    """Identical tokenizer output on both sides.

    `reference` is the route's tokenizer.json (the checkpoint's). The side under test is either another
    tokenizer.json — the copy the bundle carries to the native runtime — or the ids the native runner
    reported for the same texts (`under_test_ids`). Both are tokenized with the `tokenizers` library;
    the ids must be identical for every text (no tolerance: one differing id fails the check).
    """

    reference: str | Path
    texts: Sequence[str]
    under_test: str | Path | None = None
    under_test_ids: Sequence[Sequence[int]] | None = None
    runner_error: str | None = None  # the runtime-side runner did not report ids (why)


def check_tokenizer(tok: TokenizerParity, path: TomlPath = ()) -> GateCheck:
    name = "parity.tokenizer"
    try:
        from tokenizers import Tokenizer
    except ImportError:
        return _check(
            name,
            "hold",
            "the `tokenizers` library is not installed (pip install 'trtls[gates]'): tokenizer parity unproven",
            "TRT806",
            path,
        )
    try:
        ref = Tokenizer.from_file(str(tok.reference))
        ref_ids = [ref.encode(t).ids for t in tok.texts]
    except Exception as exc:
        return _check(
            name, "reject", f"reference tokenizer {Path(tok.reference).name} cannot be used: {exc}", "TRT806", path
        )
    if tok.runner_error is not None:
        return _check(name, "hold", f"the runtime side reported no token ids: {tok.runner_error}", "TRT806", path)
    if tok.under_test_ids is not None:
        test_ids = [list(ids) for ids in tok.under_test_ids]
        side = "ids reported by the runtime under test"
    elif tok.under_test is not None:
        try:
            test = Tokenizer.from_file(str(tok.under_test))
            test_ids = [test.encode(t).ids for t in tok.texts]
        except Exception as exc:
            return _check(
                name,
                "reject",
                f"the tokenizer under test {Path(tok.under_test).name} cannot be used: {exc}",
                "TRT806",
                path,
            )
        side = f"tokenizer {Path(tok.under_test).name}"
    else:
        return _check(
            name,
            "hold",
            "no tokenizer or token ids from the side under test: tokenizer parity unproven",
            "TRT806",
            path,
        )
    if not tok.texts:
        return _check(name, "hold", "no texts to tokenize: tokenizer parity unproven", "TRT806", path)
    if len(test_ids) != len(ref_ids):
        return _check(name, "reject", f"{side}: {len(test_ids)} id sequences for {len(ref_ids)} texts", "TRT806", path)
    for i, (a, b) in enumerate(zip(ref_ids, test_ids, strict=True)):  # lengths checked above
        if a != b:
            pos = next((k for k, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
            return _check(
                name,
                "reject",
                f"text {i}: token ids differ at position {pos} (reference {a[pos : pos + 5]}, {side} "
                f"{b[pos : pos + 5]}; lengths {len(a)} vs {len(b)})",
                "TRT806",
                path,
                {"text_index": i, "position": pos},
            )
    return _check(
        name, "pass", f"identical token ids for {len(ref_ids)} texts ({side})", "TRT806", path, {"texts": len(ref_ids)}
    )


def route_tokenizer(
    ctx: GateContext, texts: Sequence[str], opts: Mapping[str, Any]
) -> tuple[TokenizerParity | None, str]:
    """The route's tokenizer parity: the checkpoint's tokenizer.json (the reference) against the token ids the
    runtime side reports (`runtime_options.tokenizer_command`, `runtimes.tokenize`). (parity, "") or (None, why
    there is nothing to compare: then the check is not_checked)."""
    import shlex

    from trtls.checkpoint.layout import resolve_layout
    from trtls.runtimes.tokenize import runtime_token_ids

    route = ctx.route
    ck = route.source_checkpoint()
    layout = resolve_layout(ctx.resolve(ck.path), ck.revision, ck.id)
    snapshot = layout.files_dir
    if layout.problem or snapshot is None:
        return None, f"the checkpoint's files cannot be located ({layout.problem or 'no snapshot for the revision'})"
    ref = snapshot / "tokenizer.json"
    if not ref.is_file():
        return None, "the checkpoint has no tokenizer.json"
    if not ref.resolve().is_relative_to(layout.root):  # gate 1's rule: never follow a path out of the checkpoint
        return None, "the checkpoint's tokenizer.json resolves outside the checkpoint"
    command = opts.get("tokenizer_command")
    if not command:
        return None, (
            "no token ids from the runtime side: set runtime_options.tokenizer_command to the runner that tokenizes "
            "for the deployed runtime (comparing tokenizer.json with a copy of itself would prove nothing)"
        )
    argv = shlex.split(command) if isinstance(command, str) else [str(a) for a in command]
    got = runtime_token_ids(argv, texts, cwd=str(ctx.recipe_dir), timeout_s=float(opts.get("timeout_s", 60.0)))
    if got.ids is None:
        return TokenizerParity(reference=ref, texts=list(texts), under_test_ids=None, runner_error=got.error), ""
    return TokenizerParity(reference=ref, texts=list(texts), under_test_ids=got.ids), ""
