"""The sentence-transformers pipeline a checkpoint declares (modules.json, `<pooling path>/config.json`), read for the
route export as data: through `read_verified` (one `O_NOFOLLOW` descriptor, bytes matching the recorded digest),
never by importing or running anything from the checkpoint.

Exported: `Transformer` (the encoder at the checkpoint's top level) → `Pooling` with exactly one of the modes
sentence-transformers calls `cls`, `mean`, `max`, `mean_sqrt_len` → optionally `Normalize` (L2). Anything else a
modules.json lists (a `Dense` projection, weighted-mean or last-token pooling, several modes concatenated, a module
this exporter does not know) is refused with the module named: exporting the encoder alone would deploy a model its
users do not use.

The spec (`PoolingSpec.as_dict()`) goes into the bundle's provenance (`pooling`); gate 4's TRT816 compares it with
the checkpoint's own modules.json.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trtls.fs import parse_json
from trtls.route.checkpoint import MAX_EMBED, CheckpointState, read_verified
from trtls.route.errors import RouteBuildError

MODES = {  # 1_Pooling/config.json key → the mode the exporter writes
    "pooling_mode_cls_token": "cls",
    "pooling_mode_mean_tokens": "mean",
    "pooling_mode_max_tokens": "max",
    "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len",
}
NOT_EXPORTED = {  # sentence-transformers modes this exporter refuses
    "pooling_mode_weightedmean_tokens": "weighted-mean",
    "pooling_mode_lasttoken": "last-token",
}
_WHERE = ("checkpoint", "path")


@dataclass(frozen=True)
class PoolingSpec:
    mode: str  # cls | mean | max | mean_sqrt_len
    normalize: bool
    dimension: int | None  # word_embedding_dimension, when the config gives it
    modules: tuple[str, ...]  # the modules.json types, in order
    config_path: str  # the pooling config's path in the checkpoint

    def as_dict(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "normalize": self.normalize,
            "dimension": self.dimension,
            "modules": list(self.modules),
            "config": self.config_path,
            "output": "sentence_embedding",
        }


def _json(state: CheckpointState, rel: str) -> Any:
    try:
        return parse_json(read_verified(state, rel, MAX_EMBED))
    except ValueError as exc:
        raise RouteBuildError(f"{rel} does not parse: {exc}", _WHERE) from None


def sentence_pooling(state: CheckpointState) -> PoolingSpec | None:
    """The pooling the checkpoint's modules.json declares (None when it has no modules.json); RouteBuildError naming
    the module or key when it declares something this exporter does not write."""
    if "modules.json" not in state.files:
        return None
    modules = _json(state, "modules.json")
    if not isinstance(modules, list) or not all(isinstance(m, dict) for m in modules):
        raise RouteBuildError("modules.json is not a list of module objects", _WHERE)
    kinds = tuple(str(m.get("type", "")) for m in modules)
    short = [k.rsplit(".", 1)[-1] for k in kinds]
    if "Dense" in short:
        raise RouteBuildError(
            f"modules.json lists a Dense module ({modules[short.index('Dense')].get('path')!r}): a projection after "
            "the pooling is not exported; the route would deploy a sentence_embedding of the wrong width",
            _WHERE,
        )
    unknown = [k for k, s in zip(kinds, short, strict=True) if s not in ("Transformer", "Pooling", "Normalize")]
    if unknown:
        raise RouteBuildError(
            f"modules.json lists {', '.join(map(repr, unknown))}: only Transformer → Pooling → Normalize is exported",
            _WHERE,
        )
    if short not in (["Transformer", "Pooling"], ["Transformer", "Pooling", "Normalize"]):
        raise RouteBuildError(
            f"modules.json lists {' → '.join(short) or 'nothing'}: only Transformer → Pooling (→ Normalize) is "
            "exported",
            _WHERE,
        )
    if str(modules[0].get("path", "")) not in ("", "."):
        raise RouteBuildError(
            f"modules.json's Transformer lives in {modules[0].get('path')!r}: the exporter reads the top-level weights",
            _WHERE,
        )
    folder = str(modules[1].get("path", "")).strip("/")
    rel = f"{folder}/config.json" if folder else "config.json"
    if not folder or rel not in state.files:
        raise RouteBuildError(f"modules.json names Pooling at {folder!r} but the checkpoint has no {rel}", _WHERE)
    cfg = _json(state, rel)
    if not isinstance(cfg, dict):
        raise RouteBuildError(f"{rel} is not a JSON object", _WHERE)
    on = [k for k, v in cfg.items() if k.startswith("pooling_mode") and v not in (False, None)]
    refused = [k for k in on if k not in MODES]
    if refused:
        names = ", ".join(f"{k} ({NOT_EXPORTED.get(k, 'unknown mode')})" for k in refused)
        raise RouteBuildError(f"{rel}: {names} is not exported (cls, mean, max, mean_sqrt_len are)", _WHERE)
    if len(on) != 1 or cfg[on[0]] is not True:
        raise RouteBuildError(
            f"{rel}: exactly one pooling mode must be true (found {', '.join(on) or 'none'}); several modes are "
            "concatenated by sentence-transformers, which is not exported",
            _WHERE,
        )
    if cfg.get("include_prompt", True) is not True:
        raise RouteBuildError(
            f"{rel}: include_prompt = false (the prompt's tokens are left out of the pooling): not exported", _WHERE
        )
    dim = cfg.get("word_embedding_dimension")
    return PoolingSpec(
        MODES[on[0]],
        len(short) == 3,
        int(dim) if isinstance(dim, int) and not isinstance(dim, bool) else None,
        kinds,
        rel,
    )
