"""`bundle_format = "trtmc"`: the route build writes a bundle TensorRT Model Connect's native runtime loads.

What TRTMC's loader reads (bundle.trtmc): the `config.json` section is its dispatch record (`runtime_strategy`, a
strategy TRTMC registers for the model type; `engine_backend`, `trt` or `trt_rtx` for the builder that made the
engine; `trt_version` and `trt_abi` as major.minor), the encoder plugin takes its engine from `engine_plan` and its
tokenizer from `tokenizer.json`, and the header carries TRTMC's BundleInfo fields at the top level. The checkpoint's
tokenizer and sentence-transformers files keep their own names (`1_Pooling/config.json`, not `1_Pooling__config.json`).
trtls's own record (`trtls`: section digests, provenance) stays, written after every top-level field. The checkpoint's
own config.json is the body of the dispatch record (its `_`-private keys dropped); its digest is in the provenance.
The engine takes TRTMC's I/O (`route.trtmc_export`: int32 `[n]` ids and mask, one float32 `hidden_states`), and the
header's `max_cache_length` is the engine's longest input (profile 0's max), not `max_position_embeddings`; the bundle
carries no `model.onnx` (TRTMC never reads it).

No TRTMC runtime ran here (it is not installable on this machine): the layout is checked against TRTMC's documented
format and sources, by `bundle.trtmc.read_trtmc(...).load_problems()` and gate 3."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from trtls.bundle import trtmc
from trtls.core.route import RouteModel
from trtls.route.checkpoint import DEPLOYMENT_FILES, MAX_EMBED, CheckpointState, read_verified
from trtls.route.errors import RouteBuildError


def trtmc_strategy(route: RouteModel, config: Mapping[str, Any]) -> str | None:
    """The runtime_strategy a TRTMC-format bundle of this checkpoint dispatches on (None for the trtls layout);
    RouteBuildError when TRTMC registers none for its model type."""
    if route.bundle_format != "trtmc":
        return None
    model_type = str(config.get("model_type"))
    strategy = trtmc.RUNTIME_STRATEGIES.get(model_type)
    if strategy is None:
        raise RouteBuildError(
            f'bundle_format = "trtmc": TensorRT Model Connect registers no runtime_strategy trtls can write for '
            f"model_type {model_type!r} (trtls writes TRTMC bundles for: "
            f"{', '.join(sorted(trtmc.RUNTIME_STRATEGIES))}); use the default bundle_format",
            ("bundle_format",),
        )
    return strategy


def trtmc_layout(
    header: Mapping[str, Any],
    sections: Mapping[str, Any],
    state: CheckpointState,
    config: Mapping[str, Any],
    tokenizer_bytes: bytes | None,
    *,
    strategy: str,
    module: str,
    version: str,
    precision: str,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The trtls layout's header and sections rewritten as TRTMC's (see the module docstring)."""
    if tokenizer_bytes is None:
        raise RouteBuildError(
            f'bundle_format = "trtmc": TRTMC\'s {strategy} plugin reads the tokenizer from tokenizer.json, and the '
            "checkpoint has none",
            ("bundle_format",),
        )
    backend = trtmc.ENGINE_BACKENDS.get(module, "trt")
    add_special = trtmc.tokenizer_adds_special_tokens(tokenizer_bytes)
    record = trtmc.dispatch_config(
        dict(config),
        runtime_strategy=strategy,
        engine_backend=backend,
        trt_version=version,
        precision=precision,
        add_special_tokens=add_special,
    )
    model_type = str(config.get("model_type"))
    out_header = {  # TRTMC's BundleInfo order, every field a scalar at the top level; io_map (an object) after
        "model_id": header["model_id"],
        "model_type": model_type,
        "family": model_type,
        "trt_version": version,
        "trt_abi": trtmc.trt_abi(version),
        "gpu_name": header.get("gpu_name", ""),
        "created_at": header.get("created_at", ""),
        "vocab_size": int(config.get("vocab_size") or 0),
        "hidden_size": int(config.get("hidden_size") or 0),
        "num_layers": int(config.get("num_hidden_layers") or 0),
        "num_attention_heads": int(config.get("num_attention_heads") or 1),
        "num_key_value_heads": int(config.get("num_key_value_heads") or config.get("num_attention_heads") or 1),
        "max_cache_length": longest_input(header.get("io_map")) or int(config.get("max_position_embeddings") or 32),
        "runtime_strategy": strategy,
        "engine_backend": backend,
        "precision": precision,
        "tokenizer_add_special_tokens": int(add_special),
        "io_map": header.get("io_map"),
    }
    out: dict[str, Any] = {trtmc.ENGINE_PLAN: sections["engine"]}
    out[trtmc.CONFIG] = json.dumps(record, indent=2).encode("utf-8")
    out[trtmc.TOKENIZER] = tokenizer_bytes
    for rel in DEPLOYMENT_FILES:  # under their own names: TRTMC reads them by name
        if rel in state.files:
            out[rel] = read_verified(state, rel, MAX_EMBED)
    # No model.onnx: TRTMC never reads it, and the engine was built from the route's exported ONNX on disk (its
    # sha256 is in the provenance), which is what gates 3-4 match and run.
    return out_header, out


def longest_input(io_map: Any) -> int | None:
    """The longest `input_ids` the engine takes: profile 0's max (TRTMC allocates for it), or a static length. TRTMC's
    header calls it max_cache_length (its BERT builder makes the engine that long: families/bert/model.py:804)."""
    entry = (io_map or {}).get("inputs", {}).get("input_ids") if isinstance(io_map, dict) else None
    if not isinstance(entry, dict):
        return None
    shape, profile = entry.get("shape"), entry.get("profile")
    if isinstance(shape, list) and len(shape) == 1 and isinstance(shape[0], int) and shape[0] > 0:
        return shape[0]
    top = profile.get("max") if isinstance(profile, dict) else None
    return top[0] if isinstance(top, list) and len(top) == 1 and isinstance(top[0], int) else None
