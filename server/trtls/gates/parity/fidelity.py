"""Gate 4's export-fidelity checks: does the deployed model take and give what users of this checkpoint expect?

Each is made only when the checkpoint says something to compare (a tokenizer limit, a segment input, a
sentence-transformers pooling), from its files as data (gate 1's layout) and the bundle's `io_map`:

* TRT814 `parity.sequence_length` — the tokenizer's limit (tokenizer.json `truncation.max_length`,
  sentence_bert_config.json `max_seq_length`) against the longest sequence the deployed model accepts (the engine
  profile's max): a tokenizer that truncates at 128 under a profile max of 256 cuts every longer request silently;
  one longer than the profile cannot be served. Either holds.
* TRT815 `parity.inputs` — an input the checkpoint's model takes (BERT's `token_type_ids`, when
  `type_vocab_size` > 1 or the tokenizer lists it) that the deployed model dropped: `not_checked` (the deployed model
  assumes segment 0 for every token; right for single-sentence use — waive it with that reason — wrong for pairs).
* TRT816 `parity.pooling` — a sentence-transformers checkpoint (modules.json with a Pooling module): the deployed
  model must have a `sentence_embedding` output whose pooling (the bundle provenance's `pooling`, recorded by the
  route export) is the one modules.json and the Pooling config declare (mode, Normalize, no other module). Passes
  when they agree; holds when the output is missing (the route deploys the encoder's token states while users of the
  model deploy the pooled, normalized embedding), unrecorded, or different.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

from trtls.core.gate_result import GateCheck, gate_check
from trtls.gates.context import GateContext
from trtls.gates.files import read_json

_check = partial(gate_check, 4)


def _json(folder: Path, rel: str) -> Any:
    return read_json(folder / rel, follow=True)  # a checkpoint's file: a cache's snapshot links into its blobs


def _header(ctx: GateContext) -> dict[str, Any] | None:
    try:
        from trtls.bundle import read_bundle

        return read_bundle(ctx.resolve(ctx.route.bundle)).header
    except Exception:
        return None


def _io_map(ctx: GateContext) -> dict[str, Any] | None:
    header = _header(ctx)
    io = header.get("io_map") if header is not None else None
    return io if isinstance(io, dict) else None


POOLING_FLAGS = {  # sentence-transformers' Pooling config keys → the names trtls records
    "pooling_mode_cls_token": "cls",
    "pooling_mode_mean_tokens": "mean",
    "pooling_mode_max_tokens": "max",
    "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len",
    "pooling_mode_weightedmean_tokens": "weightedmean",
    "pooling_mode_lasttoken": "lasttoken",
}


def declared_pooling(folder: Path) -> dict[str, Any] | None:
    """What the checkpoint's modules.json declares after the encoder (None when it lists no Pooling module):
    {"mode": the pooling mode(s) joined by '+', "normalize": a Normalize module follows, "other": any module
    that is neither (a Dense projection, …)}."""
    modules = _json(folder, "modules.json")
    if not isinstance(modules, list):
        return None
    entries = [m for m in modules if isinstance(m, dict)]
    kinds = [str(m.get("type", "")).rsplit(".", 1)[-1] for m in entries]
    if "Pooling" not in kinds:
        return None
    where = str(entries[kinds.index("Pooling")].get("path") or "").strip("/")
    cfg = _json(folder, f"{where}/config.json") if where else None
    flags = [k for k, v in cfg.items() if k.startswith("pooling_mode") and v] if isinstance(cfg, dict) else []
    modes = [POOLING_FLAGS.get(k, k.removeprefix("pooling_mode_")) for k in flags]
    return {
        "mode": "+".join(modes) or "?",
        "normalize": "Normalize" in kinds,
        "other": [k for k in kinds if k not in ("Transformer", "Pooling", "Normalize")],
        "config": f"{where}/config.json",
    }


def _pooling_check(
    ctx: GateContext, declared: dict[str, Any], outputs: dict[str, Any], base: tuple[str, ...]
) -> GateCheck:
    """TRT816: the deployed model's sentence_embedding is the pooling modules.json declares (bundle provenance
    `pooling`, written by the route export); the numbers themselves are gate 4's tolerance check on that output."""
    what = f"{declared['mode']} pooling{', normalize' if declared['normalize'] else ''}" + (
        f", then {', '.join(declared['other'])}" if declared["other"] else ""
    )
    ev: dict[str, Any] = {
        "pooling": declared["mode"],
        "normalize": declared["normalize"],
        "other_modules": declared["other"],
        "deployed_outputs": list(outputs),
    }
    if "sentence_embedding" not in outputs:
        return _check(
            "parity.pooling",
            "hold",
            f"the checkpoint is a sentence-transformers model ({what}: modules.json) but the route deploys "
            f"{', '.join(outputs) or 'no output'}, not sentence_embedding: users of this model deploy the pooled "
            "sentence embedding (rebuild the bundle with `trtls route build`)",
            "TRT816",
            base,
            ev,
            False,
        )
    header = _header(ctx) or {}
    record = header.get("trtls")
    prov = record.get("provenance") if isinstance(record, dict) else None
    recorded = prov.get("pooling") if isinstance(prov, dict) else None
    ev["recorded"] = recorded
    if not isinstance(recorded, dict):
        return _check(
            "parity.pooling",
            "hold",
            "the deployed model has a sentence_embedding output but the bundle's provenance does not record which "
            f"pooling computes it; modules.json declares {what}: rebuild the bundle with `trtls route build`",
            "TRT816",
            base,
            ev,
            False,
        )
    exported = f"{recorded.get('mode')} pooling{', normalize' if recorded.get('normalize') else ''}"
    if (
        declared["other"]
        or recorded.get("mode") != declared["mode"]
        or bool(recorded.get("normalize")) != bool(declared["normalize"])
    ):
        return _check(
            "parity.pooling",
            "hold",
            f"the deployed sentence_embedding is {exported} but the checkpoint's modules.json declares {what}: "
            "users of this model get different embeddings; rebuild the bundle from this checkpoint",
            "TRT816",
            base,
            ev,
            False,
        )
    return _check(
        "parity.pooling",
        "pass",
        f"sentence_embedding is exported as modules.json declares: {what} ({declared['config']}); its values are "
        "compared with the checkpoint's own forward pass by the tolerance check",
        "TRT816",
        base,
        ev,
    )


def tokenizer_limit(folder: Path) -> tuple[int, str] | None:
    tok = _json(folder, "tokenizer.json")
    trunc = tok.get("truncation") if isinstance(tok, dict) else None
    if isinstance(trunc, dict) and isinstance(trunc.get("max_length"), int):
        return int(trunc["max_length"]), "tokenizer.json truncation.max_length"
    st = _json(folder, "sentence_bert_config.json")
    if isinstance(st, dict) and isinstance(st.get("max_seq_length"), int):
        return int(st["max_seq_length"]), "sentence_bert_config.json max_seq_length"
    return None


def profile_max_sequence(ctx: GateContext, input_name: str) -> int | None:
    recipe = ctx.loaded.recipe
    eng = recipe.engines.get(ctx.route.engine) if recipe is not None and ctx.route.engine else None
    if eng is None:
        return None
    lengths = []
    for prof in eng.profiles:
        shapes = prof.shapes().get(input_name)
        if shapes is not None and len(shapes.max) >= 2:
            lengths.append(int(shapes.max[1]))
    return max(lengths) if lengths else None


def fidelity_checks(ctx: GateContext) -> list[GateCheck]:
    g1 = ctx.gate1
    folder = g1.layout.files_dir if g1 is not None and g1.layout is not None else None
    io = _io_map(ctx)
    if folder is None or io is None:
        return []
    base = ("routes", ctx.route_name)
    inputs = io.get("inputs") or {}
    outputs = io.get("outputs") or {}
    out: list[GateCheck] = []
    limit = tokenizer_limit(folder)
    seq_input = next((n for n in ("input_ids",) if n in inputs), None)
    profile = profile_max_sequence(ctx, seq_input) if seq_input else None
    if limit is not None and profile is not None:
        ev = {"tokenizer_max_length": limit[0], "source": limit[1], "profile_max": profile}
        if limit[0] == profile:
            out.append(
                _check(
                    "parity.sequence_length",
                    "pass",
                    f"the tokenizer and the profile agree: {profile} tokens",
                    "TRT814",
                    base,
                    ev,
                )
            )
        else:
            what = (
                f"every request over {limit[0]} tokens is cut before it reaches the engine"
                if limit[0] < profile
                else f"a request over {profile} tokens cannot be served"
            )
            out.append(
                _check(
                    "parity.sequence_length",
                    "hold",
                    f"the tokenizer truncates at {limit[0]} ({limit[1]}) but the engine profile's max sequence is "
                    f"{profile}: {what}; make them agree",
                    "TRT814",
                    ("routes", ctx.route_name, "engine"),
                    ev,
                    False,
                )
            )
    config = _json(folder, "config.json") or {}
    tok_cfg = _json(folder, "tokenizer_config.json") or {}
    takes_segments = (isinstance(config, dict) and int(config.get("type_vocab_size") or 0) > 1) or (
        "token_type_ids" in (tok_cfg.get("model_input_names") or [] if isinstance(tok_cfg, dict) else [])
    )
    if takes_segments and inputs and "token_type_ids" not in inputs:
        out.append(
            _check(
                "parity.inputs",
                "not_checked",
                f"the checkpoint's model takes token_type_ids (type_vocab_size {config.get('type_vocab_size')}) and "
                f"the deployed model dropped it (inputs: {', '.join(inputs)}): it assumes segment 0 for every token — "
                "right for single-sentence use (waive 'parity.inputs' with that reason), wrong for sentence pairs",
                "TRT815",
                base,
                {"dropped": ["token_type_ids"], "deployed_inputs": list(inputs)},
                False,
            )
        )
    declared = declared_pooling(folder)
    if declared is not None:
        out.append(_pooling_check(ctx, declared, outputs, base))
    return out
