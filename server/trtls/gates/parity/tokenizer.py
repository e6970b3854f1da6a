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


def _checkpoint_snapshot(ctx: GateContext) -> tuple[Path | None, str]:
    """The folder holding the checkpoint's files, or why it cannot be located (gate 1's rule: nothing outside it)."""
    from trtls.checkpoint.layout import resolve_layout

    ck = ctx.route.source_checkpoint()
    layout = resolve_layout(ctx.resolve(ck.path), ck.revision, ck.id)
    if layout.problem or layout.files_dir is None:
        return None, f"the checkpoint's files cannot be located ({layout.problem or 'no snapshot for the revision'})"
    return layout.files_dir, str(layout.root)


def check_tokenizer_reference(ctx: GateContext, texts: Sequence[str], path: TomlPath) -> GateCheck:
    """TRT817 `parity.tokenizer_reference`: the checkpoint's tokenizer.json through the `tokenizers` library against
    an independent implementation over the checkpoint's transformers files (`parity.wordpiece`: vocab.txt and
    tokenizer_config.json, BERT's WordPiece), on the route's `tokenizer_texts`, padding and truncation off. Where no
    independent implementation exists (another tokenizer kind, no vocab.txt) it is `not_checked` with the reason."""
    try:
        snapshot, root = _checkpoint_snapshot(ctx)
    except Exception as exc:  # an export route has no checkpoint (route.source_checkpoint)
        return _check(NAME_REFERENCE, "not_checked", f"no checkpoint tokenizer files: {exc}", "TRT817", path)
    if snapshot is None:
        return _check(NAME_REFERENCE, "not_checked", root, "TRT817", path)
    return tokenizer_reference(snapshot, Path(root), texts, path)


NAME_REFERENCE = "parity.tokenizer_reference"


def tokenizer_reference(snapshot: Path, root: Path, texts: Sequence[str], path: TomlPath) -> GateCheck:
    """`check_tokenizer_reference` on the checkpoint files in `snapshot` (none read from outside `root`)."""

    from trtls.checkpoint.content import MAX_JSON
    from trtls.fs import parse_json, read_text
    from trtls.gates.parity.wordpiece import read_wordpiece

    name = NAME_REFERENCE

    def read(rel: str) -> str | None:
        p = snapshot / rel
        if not p.is_file() or not p.resolve().is_relative_to(root.resolve()):
            return None
        return read_text(p, limit=MAX_JSON, follow=True)

    try:
        tok_json, vocab_txt, config_text = read("tokenizer.json"), read("vocab.txt"), read("tokenizer_config.json")
        config = parse_json(config_text) if config_text else {}
    except (OSError, ValueError) as exc:
        return _check(name, "not_checked", f"the tokenizer files cannot be read: {exc}", "TRT817", path)
    if tok_json is None:
        return _check(name, "not_checked", "the checkpoint has no tokenizer.json", "TRT817", path)
    if vocab_txt is None:
        return _check(
            name,
            "not_checked",
            "the checkpoint has no vocab.txt: trtls has an independent implementation only for BERT's WordPiece "
            "(vocab.txt + tokenizer_config.json), so tokenizer.json is compared with nothing",
            "TRT817",
            path,
        )
    independent = read_wordpiece(vocab_txt.split("\n"), config if isinstance(config, dict) else {})
    if isinstance(independent, str):
        return _check(name, "not_checked", independent, "TRT817", path)
    try:
        import tokenizers
        from tokenizers import Tokenizer

        fast = Tokenizer.from_str(tok_json)
        fast.no_padding()
        fast.no_truncation()
        fast_ids = [fast.encode(t).ids for t in texts]
    except ImportError:
        return _check(name, "not_checked", "the `tokenizers` library is not installed", "TRT817", path)
    except Exception as exc:
        return _check(name, "reject", f"tokenizer.json cannot be used by `tokenizers`: {exc}", "TRT817", path)
    sides = f"tokenizer.json (tokenizers {tokenizers.__version__}) and trtls's WordPiece over vocab.txt"
    for i, (text, got) in enumerate(zip(texts, fast_ids, strict=True)):
        want = independent.encode(text)
        if got != want:
            pos = next((k for k, (x, y) in enumerate(zip(got, want, strict=False)) if x != y), min(len(got), len(want)))
            return _check(
                name,
                "reject",
                f"text {i}: {sides} differ at token {pos} (tokenizer.json {got[pos : pos + 4]}, WordPiece "
                f"{want[pos : pos + 4]} = {independent.tokens(text)[pos : pos + 4]}; lengths {len(got)} vs "
                f"{len(want)})",
                "TRT817",
                path,
                {"text_index": i, "position": pos},
            )
    return _check(
        name, "pass", f"identical ids for {len(texts)} texts from {sides}", "TRT817", path, {"texts": len(texts)}
    )
