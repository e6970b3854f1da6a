"""A reference forward pass computed from the checkpoint's own weights, in numpy — independent of any export.

Gate 4 compares the runtime under test with these outputs, so an exporter bug (a dropped activation, swapped
weights, a wrong LayerNorm epsilon) shows up as a tolerance failure instead of both sides agreeing on the same
wrong ONNX. Families (config.json `model_type`):

* `tiny-mlp` / `mlp`: `fc1 … fcN` (y = x Wᵀ + b), ReLU between layers; input `input`, output `logits`;
* `bert`: the Hugging Face BERT encoder (`BertModel`: word + position + token-type embeddings, LayerNorm, N
  post-LN layers of multi-head self-attention and a GELU feed-forward); inputs `input_ids`, `attention_mask`
  (and `token_type_ids` when fed), output `last_hidden_state`. Weight names with or without the `bert.` prefix,
  LayerNorm as `weight`/`bias` or the older `gamma`/`beta`.
* a sentence-transformers checkpoint (modules.json: Transformer → Pooling → optional Normalize) adds
  `sentence_embedding` [batch, hidden] to the bert outputs, computed here from the float64 token states as
  sentence-transformers' `Pooling` / `Normalize` modules compute it (`st_pooling` reads the spec, `pool_tokens`
  applies it). Written apart from the exporter's graph (`route.bert_export`) on purpose: a pooling bug on either
  side shows as a tolerance failure.

Weights are read with `safetensors.numpy` after the header was validated (`checkpoint.sniff`); nothing is
unpickled or imported from the checkpoint. Computation is float64, cast to the weights' dtype at the end.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from trtls.checkpoint.sniff import safetensors_problems
from trtls.fs import TooLarge, parse_json, read_text


class ForwardError(Exception):
    """The checkpoint cannot be run by the reference forward pass (unsupported family, missing tensor, bad input)."""


def load_safetensors(shards: Path | Sequence[Path]) -> dict[str, np.ndarray]:
    """Every tensor of the given *.safetensors shards (or of a folder's top-level shards), each header validated
    first (`checkpoint.sniff`): a header that lies is a ForwardError naming the tensor, never the loader's crash."""
    from trtls.fs.models import load_safetensors as load_file

    paths = sorted(p for p in shards.glob("*.safetensors") if p.is_file()) if isinstance(shards, Path) else list(shards)
    if not paths:
        raise ForwardError("no *.safetensors weights in the checkpoint")
    weights: dict[str, np.ndarray] = {}
    for shard in paths:
        problems = safetensors_problems(shard)
        if problems:
            raise ForwardError("; ".join(problems))
        for name, arr in load_file(shard).items():
            if name in weights:
                raise ForwardError(f"tensor {name!r} appears in two weight shards")
            weights[name] = arr
    return weights


def _need(weights: Mapping[str, np.ndarray], name: str) -> np.ndarray:
    if name not in weights:
        raise ForwardError(f"the checkpoint has no tensor {name!r}")
    return np.asarray(weights[name], dtype=np.float64)


def mlp_forward(
    weights: Mapping[str, np.ndarray], config: Mapping[str, Any], feed: Mapping[str, np.ndarray]
) -> dict[str, np.ndarray]:
    if "input" not in feed:
        raise ForwardError(f"the mlp reference takes input 'input' (fed: {', '.join(feed)})")
    x = np.asarray(feed["input"], dtype=np.float64)
    n = 0
    while f"fc{n + 1}.weight" in weights:
        n += 1
    if n == 0:
        raise ForwardError("the checkpoint has no tensor 'fc1.weight'")
    for i in range(1, n + 1):
        w = _need(weights, f"fc{i}.weight")
        if x.shape[-1] != w.shape[1]:
            raise ForwardError(f"fc{i}.weight has shape {w.shape}; the input to it has width {x.shape[-1]}")
        x = x @ w.T
        if f"fc{i}.bias" in weights:
            x = x + _need(weights, f"fc{i}.bias")
        if i < n:
            x = np.maximum(x, 0.0)
    return {"logits": x.astype(weights["fc1.weight"].dtype)}


_erf = np.frompyfunc(math.erf, 1, 1)


def gelu(x: np.ndarray) -> np.ndarray:
    """Exact GELU (Hugging Face `gelu`): 0.5 x (1 + erf(x / √2))."""
    return 0.5 * x * (1.0 + np.asarray(_erf(x / math.sqrt(2.0)), dtype=np.float64))


def layer_norm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


def _bert_prefix(weights: Mapping[str, np.ndarray]) -> str:
    for prefix in ("", "bert."):
        if f"{prefix}embeddings.word_embeddings.weight" in weights:
            return prefix
    raise ForwardError("the checkpoint has no tensor 'embeddings.word_embeddings.weight' (nor 'bert.…')")


def _ln(weights: Mapping[str, np.ndarray], base: str) -> tuple[np.ndarray, np.ndarray]:
    if f"{base}.weight" in weights:
        return _need(weights, f"{base}.weight"), _need(weights, f"{base}.bias")
    return _need(weights, f"{base}.gamma"), _need(weights, f"{base}.beta")


ST_POOLING_KEYS = {  # sentence-transformers' 1_Pooling/config.json flags → what pool_tokens computes
    "pooling_mode_cls_token": "cls",
    "pooling_mode_mean_tokens": "mean",
    "pooling_mode_max_tokens": "max",
    "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len",
}
MAX_ST_FILE = 1024 * 1024


def _read_small_json(path: Path, rel: str) -> Any:

    try:
        return parse_json(read_text(path, limit=MAX_ST_FILE, follow=True))
    except TooLarge:
        raise ForwardError(f"{rel} is larger than {MAX_ST_FILE} bytes") from None
    except (OSError, ValueError) as exc:
        raise ForwardError(f"{rel}: {exc}") from None


def st_pooling(files: Mapping[str, Path]) -> dict[str, Any] | None:
    """The sentence-transformers pooling a checkpoint declares, from its files (relative path → file, as gate 1's
    layout lists them): {"mode", "normalize", "config"} — None without modules.json; ForwardError for a pipeline the
    reference does not compute (a Dense projection, an unknown module, weighted-mean/last-token or several modes)."""
    if "modules.json" not in files:
        return None
    modules = _read_small_json(files["modules.json"], "modules.json")
    if not isinstance(modules, list):
        raise ForwardError("modules.json is not a list")
    names = []
    pooling_dir: str | None = None
    for m in modules:
        kind = str(m.get("type", "")) if isinstance(m, dict) else ""
        name = kind.split(".")[-1]
        if name not in ("Transformer", "Pooling", "Normalize"):
            raise ForwardError(f"modules.json: the reference does not compute module {kind or m!r}")
        if name == "Pooling" and isinstance(m, dict):
            pooling_dir = str(m.get("path") or "").strip("/")
        names.append(name)
    if names[:2] != ["Transformer", "Pooling"] or names[2:] not in ([], ["Normalize"]):
        raise ForwardError(f"modules.json: {' → '.join(names)} is not Transformer → Pooling (→ Normalize)")
    cfg_rel = f"{pooling_dir}/config.json"
    if not pooling_dir or cfg_rel not in files:
        raise ForwardError(f"modules.json: the Pooling module's {cfg_rel} is not in the checkpoint")
    cfg = _read_small_json(files[cfg_rel], cfg_rel)
    if not isinstance(cfg, dict):
        raise ForwardError(f"{cfg_rel} is not a JSON object")
    flags = {k for k, v in cfg.items() if k.startswith("pooling_mode") and v}
    modes = [ST_POOLING_KEYS[k] for k in sorted(flags) if k in ST_POOLING_KEYS]
    if len(flags) != 1 or len(modes) != 1:
        known = ", ".join(ST_POOLING_KEYS)
        raise ForwardError(f"{cfg_rel}: the reference computes one of {known}, got {sorted(flags)}")
    return {"mode": modes[0], "normalize": names[-1] == "Normalize", "config": cfg_rel}


def pool_tokens(tokens: np.ndarray, mask: np.ndarray, mode: str, normalize: bool) -> np.ndarray:
    """sentence-transformers' Pooling (and Normalize) on float64 token states [batch, sequence, hidden] under the
    attention mask [batch, sequence]: cls = first token; mean = masked sum / max(count, 1e-9); mean_sqrt_len =
    masked sum / sqrt(max(count, 1e-9)); max = maximum with masked tokens at -1e9; normalize = x / max(‖x‖, 1e-12)."""
    tokens = np.asarray(tokens, dtype=np.float64)
    m = np.asarray(mask, dtype=np.float64)[..., None]
    if mode == "cls":
        out = tokens[:, 0, :]
    elif mode == "max":
        out = np.where(m > 0, tokens, -1e9).max(axis=1)
    elif mode in ("mean", "mean_sqrt_len"):
        summed = (tokens * m).sum(axis=1)
        count = np.clip(m.sum(axis=1), 1e-9, None)
        out = summed / (count if mode == "mean" else np.sqrt(count))
    else:
        raise ForwardError(f"pooling mode {mode!r} is not computed by the reference")
    if normalize:
        out = out / np.clip(np.linalg.norm(out, ord=2, axis=1, keepdims=True), 1e-12, None)
    return out


def bert_forward(
    weights: Mapping[str, np.ndarray],
    config: Mapping[str, Any],
    feed: Mapping[str, np.ndarray],
    pooling: Mapping[str, Any] | None = None,
) -> dict[str, np.ndarray]:
    act = str(config.get("hidden_act", "gelu"))
    if act != "gelu":
        raise ForwardError(f"hidden_act {act!r}: the bert reference computes exact 'gelu' only")
    if "input_ids" not in feed:
        raise ForwardError(f"the bert reference takes input 'input_ids' (fed: {', '.join(feed)})")
    ids = np.asarray(feed["input_ids"])
    if ids.ndim != 2 or ids.dtype.kind not in "iu":
        raise ForwardError(f"input_ids must be integer [batch, sequence], got {ids.dtype} {ids.shape}")
    mask = np.asarray(feed.get("attention_mask", np.ones_like(ids)), dtype=np.float64)
    types = np.asarray(feed.get("token_type_ids", np.zeros_like(ids)))
    p = _bert_prefix(weights)
    eps = float(config.get("layer_norm_eps", 1e-12))
    heads = int(config["num_attention_heads"])
    layers = int(config["num_hidden_layers"])
    word = _need(weights, f"{p}embeddings.word_embeddings.weight")
    if ids.size and (ids.min() < 0 or ids.max() >= word.shape[0]):
        raise ForwardError(f"input_ids outside the vocabulary [0, {word.shape[0]})")
    seq = ids.shape[1]
    pos = _need(weights, f"{p}embeddings.position_embeddings.weight")
    if seq > pos.shape[0]:
        raise ForwardError(f"sequence length {seq} is longer than max_position_embeddings {pos.shape[0]}")
    x = word[ids] + pos[np.arange(seq)][None] + _need(weights, f"{p}embeddings.token_type_embeddings.weight")[types]
    x = layer_norm(x, *_ln(weights, f"{p}embeddings.LayerNorm"), eps)
    hidden = x.shape[-1]
    dh = hidden // heads
    bias = (1.0 - mask)[:, None, None, :] * np.finfo(np.float32).min  # as HF: masked keys get the float32 minimum

    def dense(v: np.ndarray, base: str) -> np.ndarray:
        return v @ _need(weights, f"{base}.weight").T + _need(weights, f"{base}.bias")

    def split(v: np.ndarray) -> np.ndarray:  # [b, s, h] → [b, heads, s, dh]
        return v.reshape(v.shape[0], v.shape[1], heads, dh).transpose(0, 2, 1, 3)

    for i in range(layers):
        lp = f"{p}encoder.layer.{i}"
        q, k, v = (split(dense(x, f"{lp}.attention.self.{n}")) for n in ("query", "key", "value"))
        scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(dh) + bias
        scores = scores - scores.max(-1, keepdims=True)
        probs = np.exp(scores)
        probs = probs / probs.sum(-1, keepdims=True)
        ctx = (probs @ v).transpose(0, 2, 1, 3).reshape(x.shape)
        x = layer_norm(
            dense(ctx, f"{lp}.attention.output.dense") + x, *_ln(weights, f"{lp}.attention.output.LayerNorm"), eps
        )
        ff = dense(gelu(dense(x, f"{lp}.intermediate.dense")), f"{lp}.output.dense")
        x = layer_norm(ff + x, *_ln(weights, f"{lp}.output.LayerNorm"), eps)
    dtype = weights[f"{p}embeddings.word_embeddings.weight"].dtype
    out = {"last_hidden_state": x.astype(dtype)}
    if pooling is not None:
        pooled = pool_tokens(x, mask, str(pooling["mode"]), bool(pooling.get("normalize")))
        out["sentence_embedding"] = pooled.astype(dtype)
    return out


FAMILIES: dict[
    str, Callable[[Mapping[str, np.ndarray], Mapping[str, Any], Mapping[str, np.ndarray]], dict[str, np.ndarray]]
] = {
    "tiny-mlp": mlp_forward,
    "mlp": mlp_forward,
    "bert": bert_forward,
}


def reference_forward(
    weights: Mapping[str, np.ndarray],
    config: Mapping[str, Any],
    feed: Mapping[str, np.ndarray],
    pooling: Mapping[str, Any] | None = None,
) -> dict[str, np.ndarray]:
    """The checkpoint's outputs for one feed, computed from its weights (see the module doc); with `pooling`
    (`st_pooling`), also the sentence-transformers `sentence_embedding` (bert only)."""
    family = str(config.get("model_type"))
    fn = FAMILIES.get(family)
    if fn is None:
        raise ForwardError(f"no reference forward pass for model_type {family!r} (known: {', '.join(FAMILIES)})")
    if pooling is not None and family != "bert":
        raise ForwardError(f"modules.json declares a pooling; the {family} reference does not compute one")
    try:
        return fn(weights, config, feed) if pooling is None else bert_forward(weights, config, feed, pooling)
    except (KeyError, ValueError, TypeError, IndexError) as exc:
        raise ForwardError(f"{family} reference: {type(exc).__name__}: {exc}") from exc
