"""A small random-initialised BERT checkpoint in the real Hugging Face layout (config.json, model.safetensors with
`bert.`-prefixed names as BertModel saves them, a WordPiece tokenizer.json built with the `tokenizers` library,
tokenizer_config.json, a model card). Deterministic for a seed."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from safetensors.numpy import save_file

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [
    w for w in "the a engine builds tiny model route bundle canary rollback gate parity token ##s ##ing".split()
]


def bert_config(hidden: int = 32, heads: int = 4, layers: int = 2, intermediate: int = 64) -> dict:
    return {
        "architectures": ["BertModel"],
        "model_type": "bert",
        "vocab_size": len(VOCAB),
        "hidden_size": hidden,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "intermediate_size": intermediate,
        "hidden_act": "gelu",
        "max_position_embeddings": 64,
        "type_vocab_size": 2,
        "layer_norm_eps": 1e-12,
        "pad_token_id": 0,
    }


def bert_weights(config: dict, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    h, inter = config["hidden_size"], config["intermediate_size"]

    def r(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) * 0.2).astype(np.float32)

    w = {
        "bert.embeddings.word_embeddings.weight": r(config["vocab_size"], h),
        "bert.embeddings.position_embeddings.weight": r(config["max_position_embeddings"], h),
        "bert.embeddings.token_type_embeddings.weight": r(config["type_vocab_size"], h),
        "bert.embeddings.LayerNorm.weight": 1 + r(h),
        "bert.embeddings.LayerNorm.bias": r(h),
    }
    for i in range(config["num_hidden_layers"]):
        p = f"bert.encoder.layer.{i}"
        for n in ("query", "key", "value"):
            w[f"{p}.attention.self.{n}.weight"], w[f"{p}.attention.self.{n}.bias"] = r(h, h), r(h)
        w[f"{p}.attention.output.dense.weight"], w[f"{p}.attention.output.dense.bias"] = r(h, h), r(h)
        w[f"{p}.attention.output.LayerNorm.weight"], w[f"{p}.attention.output.LayerNorm.bias"] = 1 + r(h), r(h)
        w[f"{p}.intermediate.dense.weight"], w[f"{p}.intermediate.dense.bias"] = r(inter, h), r(inter)
        w[f"{p}.output.dense.weight"], w[f"{p}.output.dense.bias"] = r(h, inter), r(h)
        w[f"{p}.output.LayerNorm.weight"], w[f"{p}.output.LayerNorm.bias"] = 1 + r(h), r(h)
    return w


def tokenizer_json() -> str:
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors

    tok = Tokenizer(models.WordPiece({t: i for i, t in enumerate(VOCAB)}, unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", 2), ("[SEP]", 3)]
    )
    return tok.to_str()


def make_bert_checkpoint(folder: Path, seed: int = 0, **config_kw: int) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    config = bert_config(**config_kw)
    (folder / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    save_file(bert_weights(config, seed), str(folder / "model.safetensors"), metadata={"format": "pt"})
    (folder / "tokenizer.json").write_text(tokenizer_json())
    (folder / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": True, "model_max_length": 64}))
    (folder / "README.md").write_text("---\nlicense: apache-2.0\n---\n# tiny random BERT\n\nTest checkpoint.\n")
    return folder


def bert_feed(batch: int = 2, seq: int = 7, seed: int = 1) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    ids = rng.integers(5, len(VOCAB), size=(batch, seq)).astype(np.int64)
    mask = np.ones((batch, seq), np.int64)
    mask[0, -2:] = 0  # padding in the first row
    return {"input_ids": ids, "attention_mask": mask}
