"""Gate 4's malformed inputs for a model over token ids (TRT807, beside the generic cases in `parity.robustness`):
what a text service meets when a client or a tokenizer goes wrong, sent to the runtime under test unfiltered.

* `id_over_vocab`: one id equal to the vocabulary size (config.json `vocab_size`: the embedding has no such row) —
  must be refused: an answer is a read outside the table (ONNX Runtime refuses it; TensorRT's gather does not check);
* `negative_id`: one id of -1. ONNX's Gather defines a negative index as counted from the end and ONNX Runtime
  answers it: that outcome is recorded as observed, not judged (`judged: false`, named apart from the cases the pass
  covers, `robustness.NEGATIVE_ID_OBSERVED`) — the operator's documented reading, the same for every model, so it
  says nothing about this artifact; the service in front of the runtime must refuse it. A hang or a crash on it is
  judged (reject);
* `over_long`: a sequence one token longer than the model's positions (`max_position_embeddings`, less the rows
  RoBERTa-style models reserve) — must be refused: there is no position for the last token;
* on a model with TRTMC's BERT I/O (`gates.parity.trtmc_feed`) whose engine profile stops short of the positions,
  `over_long` is one token past profile 0's max instead (129 for a 128-token engine of a 512-position model: the
  lengths TRTMC's runtime answers silently wrong, since nothing in it truncates or checks setInputShape), and
  `over_positions` is the sequence one past the positions. An engine's runtime must refuse `over_long`; ONNX Runtime
  on the ONNX the engine was built from has no profile and answers it rightly, and a route that states
  `max_input_tokens` ≤ the profile's max has its service cut it first: either answer is observed, not judged
  (`over_long_observed`);
* `all_zero_mask`: an attention mask of zeros (a request that is all padding) — an answer is acceptable (finite or
  NaN, said in the evidence), a hang or a crash is not.

Which inputs are ids and masks: integer inputs named `input_ids` and `attention_mask` (the names every exporter of
these models uses, trtls's own included). A case whose input or limit is not there is `not_applicable`, saying why.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

TEXT_MUST_REFUSE = ("id_over_vocab", "over_long", "over_positions")
ONNX_KINDS = ("onnxruntime", "onnx_reference")  # RuntimeSpec kinds that run the ONNX, not an engine with a profile
OFFSET_POSITIONS = ("roberta", "xlm-roberta", "camembert", "longformer", "mpnet")

Case = tuple[str, dict[str, np.ndarray] | None, str]


def _named(feed: Mapping[str, np.ndarray], word: str) -> str | None:
    return next((k for k, v in feed.items() if word in k and np.asarray(v).dtype.kind in "iu"), None)


def text_cases(feed: Mapping[str, np.ndarray], limits: Mapping[str, int] | None) -> list[Case]:
    """The text cases for `feed` (empty when it has no integer `input_ids`)."""
    ids_name = _named(feed, "input_ids")
    if ids_name is None:
        return []
    limits = limits or {}
    ids = np.asarray(feed[ids_name])
    cases: list[Case] = []

    def with_ids(value: int) -> dict[str, np.ndarray]:
        out = {k: np.asarray(v) for k, v in feed.items()}
        changed = ids.copy()
        changed.flat[min(1, changed.size - 1)] = value  # a token inside the sequence, not the first ([CLS])
        out[ids_name] = changed
        return out

    vocab = limits.get("vocab_size")
    if vocab:
        cases.append(("id_over_vocab", with_ids(vocab), f"{ids_name!r} with id {vocab} (the vocabulary has {vocab})"))
    else:
        cases.append(("id_over_vocab", None, "the vocabulary size is unknown (no config.json vocab_size)"))
    if ids.dtype.kind == "i":
        cases.append(("negative_id", with_ids(-1), f"{ids_name!r} with id -1"))
    else:
        cases.append(("negative_id", None, f"{ids_name!r} is {ids.dtype}: a negative id cannot be expressed"))
    positions, profile = limits.get("positions"), limits.get("profile_max")

    def longer(length: int) -> dict[str, np.ndarray]:
        out = {}
        for k, v in feed.items():
            a = np.asarray(v)
            if a.shape == ids.shape:  # ids, mask, token types: one longer sequence, batch 1 ([n] for a rank-1 model)
                out[k] = np.resize(a if a.ndim == 1 else a[:1], (length,) if a.ndim == 1 else (1, length))
                out[k] = out[k].astype(a.dtype)
            else:
                out[k] = a
        return out

    if positions and profile and profile < positions and ids.ndim in (1, 2):
        said = f"one past the engine profile's max {profile}; the model has {positions} positions"
        cases.append(("over_long", longer(profile + 1), f"a sequence of {profile + 1} tokens ({said})"))
        beyond = f"a sequence of {positions + 1} tokens (the model has {positions} positions)"
        cases.append(("over_positions", longer(positions + 1), beyond))
    elif positions and ids.ndim in (1, 2):
        length = positions + 1
        cases.append(
            ("over_long", longer(length), f"a sequence of {length} tokens (the model has {positions} positions)")
        )
    else:
        cases.append(("over_long", None, "the model's positions are unknown (no config.json max_position_embeddings)"))
    mask_name = _named(feed, "attention_mask")
    if mask_name is not None:
        zero = {k: np.asarray(v) for k, v in feed.items()}
        zero[mask_name] = np.zeros_like(zero[mask_name])
        cases.append(("all_zero_mask", zero, f"{mask_name!r} all zeros (a request of padding only)"))
    else:
        cases.append(("all_zero_mask", None, "no integer attention_mask input"))
    return cases


def over_long_observed(limits: Mapping[str, int] | None, kind: str) -> str | None:
    """Why an answered `over_long` built from the engine profile is observed, not judged (None: it is judged)."""
    limits = limits or {}
    profile, cap = limits.get("profile_max"), limits.get("length_cap")
    if not profile or not limits.get("positions") or profile >= limits["positions"]:
        return None
    if kind in ONNX_KINDS:
        return (
            f"answered by {kind} on the ONNX the engine was built from, which has no profile and a position for every "
            f"token up to {limits['positions']}: right there; the engine's runtime must refuse it (TRTMC's would "
            "answer it from a cut input)"
        )
    if cap is not None and cap <= profile:
        return f"the route's service cuts requests at max_input_tokens = {cap} before the runtime sees them"
    return None


def adapted_limits(limits: Mapping[str, int], io_map: Any, length_cap: int | None) -> dict[str, int]:
    """`limits` with the deployed engine's longest input (`profile_max`, from the bundle's io_map) and the route's
    `length_cap` (max_input_tokens), for a model with TRTMC's BERT I/O."""
    from trtls.bundle.trtmc_contract import longest_request

    out = dict(limits)
    profile = longest_request(io_map)
    if profile is not None:
        out["profile_max"] = profile
    if length_cap is not None:
        out["length_cap"] = length_cap
    return out


def text_limits(config: Any) -> dict[str, int]:
    """vocab_size and usable positions from a checkpoint's config.json (what is there)."""
    if not isinstance(config, dict):
        return {}
    out: dict[str, int] = {}
    if isinstance(config.get("vocab_size"), int):
        out["vocab_size"] = config["vocab_size"]
    positions = config.get("max_position_embeddings")
    if isinstance(positions, int) and config.get("position_embedding_type", "absolute") == "absolute":
        offset = (config.get("pad_token_id") or 0) + 1 if config.get("model_type") in OFFSET_POSITIONS else 0
        out["positions"] = positions - offset
    return out


def route_text_limits(ctx: Any) -> dict[str, int]:
    """`text_limits` of the route's checkpoint (nothing for a route without one, or an unreadable config.json)."""
    from trtls.checkpoint.content import load_json
    from trtls.checkpoint.layout import resolve_layout

    try:
        ck = ctx.route.source_checkpoint()
        layout = resolve_layout(ctx.resolve(ck.path), ck.revision, ck.id)
        if layout.problem or layout.files_dir is None:
            return {}
        config = layout.files_dir / "config.json"
        if not config.is_file() or not config.resolve().is_relative_to(layout.root.resolve()):
            return {}
        return text_limits(load_json(config))
    except Exception:  # no checkpoint (an export route), an unreadable config: no text limits, the cases say so
        return {}
