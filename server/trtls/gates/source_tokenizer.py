"""Gate 1's tokenizer ↔ model checks (TRT514), read from the checkpoint's files as data: does the tokenizer fit the
model it ships with?

* `tokenizer_vocabulary`: every id the tokenizer can emit indexes a row of the token embedding (the weights' own
  shape, read from the safetensors header; config.json's `vocab_size` beside it). A tokenizer of 50,522 entries over a
  30,522-row embedding passes every file check, then the runtime fails (or reads another tensor's memory) on the
  first id ≥ 30,522: **reject**. Fewer entries than rows is usual (embeddings padded to a multiple of 8 or 64).
* `tokenizer_special_tokens`: each special token the tokenizer names (pad, cls, sep, bos, eos, unk, mask) is in its
  vocabulary and has the id config.json gives it (`pad_token_id`, …): otherwise padding or pooling reads the wrong
  row — **hold**, naming each.
* `tokenizer_max_length`: every length the tokenizer files allow (tokenizer_config.json `model_max_length`,
  tokenizer.json `truncation.max_length`, sentence_bert_config.json `max_seq_length`) fits the position embedding's
  rows (RoBERTa-style models reserve `pad_token_id + 1` of them): a longer sequence has no position — **hold**.

Made only for a model with a token embedding or a `vocab_size` (a model over feature vectors has no tokenizer to
fit); `not_checked` with the reason where one side cannot be read.
"""

from __future__ import annotations

from typing import Any

from trtls.checkpoint.content import MAX_JSON, load_json
from trtls.checkpoint.layout import CheckpointFile
from trtls.checkpoint.sniff import read_safetensors_header
from trtls.fs import read_text
from trtls.gates.source_content import PATH, SourceChecks

CODE = "TRT514"
TOKEN_EMBEDDINGS = (
    "word_embeddings.weight",
    "embed_tokens.weight",
    "wte.weight",
    "shared.weight",
    "tok_embeddings.weight",
)
POSITION_EMBEDDINGS = ("position_embeddings.weight", "wpe.weight", "embed_positions.weight")
OFFSET_POSITIONS = ("roberta", "xlm-roberta", "camembert", "longformer", "mpnet")  # positions start at pad + 1
SPECIAL = ("pad", "cls", "sep", "bos", "eos", "unk", "mask")
NO_LIMIT = 10**12  # transformers writes int(1e30) for "no limit"


def _rows(by_rel: dict[str, CheckpointFile], weights: list[str], suffixes: tuple[str, ...]) -> tuple[str, int] | None:
    """(tensor name, rows) of the first tensor whose name ends in one of `suffixes`, from the safetensors headers."""
    for rel in weights:
        if not rel.endswith(".safetensors"):
            continue
        _, tensors, _ = read_safetensors_header(by_rel[rel].real)
        for suffix in suffixes:
            for name, t in sorted(tensors.items()):
                if (name == suffix or name.endswith("." + suffix)) and len(t.shape) == 2:
                    return name, int(t.shape[0])
    return None


def _json(by_rel: dict[str, CheckpointFile], rel: str) -> Any:
    if rel not in by_rel:
        return None
    try:
        return load_json(by_rel[rel].real)
    except (OSError, ValueError):
        return None  # TRT511 says the file does not parse


def tokenizer_vocabulary(by_rel: dict[str, CheckpointFile]) -> tuple[dict[str, int], str] | None:
    """token → id over the tokenizer's vocabulary and added tokens, and where it was read from."""
    tok = _json(by_rel, "tokenizer.json")
    if isinstance(tok, dict):
        vocab: dict[str, int] = {}
        model = tok.get("model")
        entries = model.get("vocab") if isinstance(model, dict) else None
        if isinstance(entries, dict):
            vocab.update({str(k): int(v) for k, v in entries.items() if isinstance(v, int)})
        elif isinstance(entries, list):  # Unigram: [[piece, score], …], the id is the position
            vocab.update({str(e[0]): i for i, e in enumerate(entries) if isinstance(e, list) and e})
        for added in tok.get("added_tokens") or []:
            if isinstance(added, dict) and isinstance(added.get("id"), int):
                vocab[str(added.get("content"))] = added["id"]
        if vocab:
            return vocab, "tokenizer.json"
    if "vocab.txt" in by_rel:
        try:
            lines = read_text(by_rel["vocab.txt"].real, limit=MAX_JSON, follow=True).split("\n")
        except (OSError, ValueError):
            return None
        if lines and lines[-1] == "":
            lines.pop()
        return {line: i for i, line in reversed(list(enumerate(lines)))}, "vocab.txt"
    return None


CONVENTIONAL = {  # a special token's usual spelling → its kind, for tokenizer.json's added and template tokens
    "[PAD]": "pad",
    "<pad>": "pad",
    "[CLS]": "cls",
    "[SEP]": "sep",
    "[UNK]": "unk",
    "<unk>": "unk",
    "[MASK]": "mask",
    "<mask>": "mask",
    "<s>": "bos",
    "</s>": "eos",
}


def _special_tokens(by_rel: dict[str, CheckpointFile]) -> dict[str, str]:
    """kind → token: what special_tokens_map.json and tokenizer_config.json name, then what tokenizer.json itself
    says (its padding token, its model's unk_token, its post-processor's template tokens, special added tokens)."""
    out: dict[str, str] = {}
    for rel in ("special_tokens_map.json", "tokenizer_config.json"):
        data = _json(by_rel, rel)
        if not isinstance(data, dict):
            continue
        for kind in SPECIAL:
            value = data.get(f"{kind}_token")
            value = value.get("content") if isinstance(value, dict) else value
            if isinstance(value, str) and kind not in out:
                out[kind] = value
    tok = _json(by_rel, "tokenizer.json")
    if not isinstance(tok, dict):
        return out
    named: list[tuple[str, Any]] = []
    padding, model, post = tok.get("padding"), tok.get("model"), tok.get("post_processor")
    if isinstance(padding, dict):
        named.append(("pad", padding.get("pad_token")))
    if isinstance(model, dict):
        named.append(("unk", model.get("unk_token")))
    if isinstance(post, dict):
        for kind in ("cls", "sep"):  # BertProcessing / RobertaProcessing: "cls": [token, id]
            pair = post.get(kind)
            named.append((kind, pair[0] if isinstance(pair, list) and pair else None))
        templated = post.get("special_tokens")
        for token in templated if isinstance(templated, dict) else {}:  # TemplateProcessing
            named.append((CONVENTIONAL.get(token, ""), token))
    for added in tok.get("added_tokens") or []:
        if isinstance(added, dict) and added.get("special"):
            named.append((CONVENTIONAL.get(str(added.get("content")), ""), added.get("content")))
    for kind, token in named:
        if kind and isinstance(token, str) and kind not in out:
            out[kind] = token
    return out


def _length_claims(by_rel: dict[str, CheckpointFile]) -> list[tuple[str, int]]:
    claims = []
    tc = _json(by_rel, "tokenizer_config.json")
    if isinstance(tc, dict) and isinstance(tc.get("model_max_length"), int) and tc["model_max_length"] < NO_LIMIT:
        claims.append(("tokenizer_config.json model_max_length", tc["model_max_length"]))
    tok = _json(by_rel, "tokenizer.json")
    trunc = tok.get("truncation") if isinstance(tok, dict) else None
    if isinstance(trunc, dict) and isinstance(trunc.get("max_length"), int):
        claims.append(("tokenizer.json truncation.max_length", trunc["max_length"]))
    st = _json(by_rel, "sentence_bert_config.json")
    if isinstance(st, dict) and isinstance(st.get("max_seq_length"), int):
        claims.append(("sentence_bert_config.json max_seq_length", st["max_seq_length"]))
    return claims


def check_tokenizer_fits(
    checks: SourceChecks, by_rel: dict[str, CheckpointFile], config: Any, weights: list[str]
) -> None:
    """TRT514's three checks (see the module docstring); nothing for a model with no token embedding."""
    config = config if isinstance(config, dict) else {}
    embedding = _rows(by_rel, weights, TOKEN_EMBEDDINGS)
    config_vocab = config.get("vocab_size") if isinstance(config.get("vocab_size"), int) else None
    if embedding is None and config_vocab is None:
        return  # not a model over tokens
    found = tokenizer_vocabulary(by_rel)
    if found is None:
        for name in ("tokenizer_vocabulary", "tokenizer_special_tokens", "tokenizer_max_length"):
            checks.add(name, "not_checked", "no tokenizer vocabulary to read (tokenizer.json or vocab.txt)", CODE, PATH)
        return
    vocab, source = found
    size = max(vocab.values()) + 1
    rows_name, rows = embedding if embedding is not None else ("config.json vocab_size", config_vocab)
    ev: dict[str, Any] = {
        "tokenizer_size": size,
        "read_from": source,
        "embedding": rows_name,
        "embedding_rows": rows,
        "config_vocab_size": config_vocab,
    }
    if rows is None:
        checks.add("tokenizer_vocabulary", "not_checked", "the token embedding's rows cannot be read", CODE, PATH, **ev)
    elif size > rows:
        over = sorted(t for t, i in vocab.items() if i >= rows)
        checks.add(
            "tokenizer_vocabulary",
            "reject",
            f"the tokenizer ({source}) emits ids up to {size - 1} but the token embedding {rows_name} has {rows} rows: "
            f"{len(over)} token(s) index no row (e.g. {', '.join(repr(t) for t in over[:3])}); the runtime fails or "
            "reads other memory on them",
            CODE,
            PATH,
            **ev,
        )
    else:
        also = "" if config_vocab in (None, rows) else f"; config.json vocab_size {config_vocab} differs"
        checks.add(
            "tokenizer_vocabulary",
            "hold" if also else "pass",
            f"{size} tokenizer ids ({source}) within the {rows} rows of {rows_name}{also}",
            CODE,
            PATH,
            **ev,
        )

    special = _special_tokens(by_rel)
    problems, said = [], []
    for kind, token in sorted(special.items()):
        token_id = vocab.get(token)
        want = config.get(f"{kind}_token_id")
        if token_id is None:
            problems.append(f"{kind}_token {token!r} is not in the tokenizer's vocabulary")
        elif isinstance(want, int) and want != token_id:
            problems.append(
                f"{kind}_token {token!r} is id {token_id} in the tokenizer, config.json {kind}_token_id is {want}"
            )
        else:
            said.append(f"{kind} {token!r} = {token_id}")
    config_ids = sorted(f"{k}_token_id" for k in SPECIAL if isinstance(config.get(f"{k}_token_id"), int))
    if not special and config_ids:
        checks.add(
            "tokenizer_special_tokens",
            "not_checked",
            f"config.json gives {', '.join(config_ids)} but the tokenizer files name no special token to compare",
            CODE,
            PATH,
        )
    elif special:
        checks.add(
            "tokenizer_special_tokens",
            "hold" if problems else "pass",
            ("special tokens disagree with the model: " + "; ".join(problems)) if problems else ", ".join(said),
            CODE,
            PATH,
            special=special,
        )

    positions = _rows(by_rel, weights, POSITION_EMBEDDINGS)
    offset = (config.get("pad_token_id", 0) or 0) + 1 if config.get("model_type") in OFFSET_POSITIONS else 0
    limit_from = positions[0] if positions else "config.json max_position_embeddings"
    limit = positions[1] if positions else config.get("max_position_embeddings")
    claims = _length_claims(by_rel)
    if not isinstance(limit, int) or config.get("position_embedding_type", "absolute") != "absolute":
        checks.add(
            "tokenizer_max_length",
            "not_checked",
            "the model has no absolute position embedding to bound the sequence length (rotary or relative "
            "positions, or none read)",
            CODE,
            PATH,
            claims=claims,
        )
        return
    usable = limit - offset
    over_limit = [f"{where} {n}" for where, n in claims if n > usable]
    ev2: dict[str, Any] = {"claims": dict(claims), "positions": limit_from, "usable_positions": usable}
    if not claims:
        checks.add(
            "tokenizer_max_length", "not_checked", "the tokenizer files state no maximum length", CODE, PATH, **ev2
        )
    elif over_limit:
        checks.add(
            "tokenizer_max_length",
            "hold",
            f"the tokenizer allows sequences longer than the model's {usable} positions ({limit_from}"
            + (f", {offset} reserved" if offset else "")
            + f"): {', '.join(over_limit)}",
            CODE,
            PATH,
            **ev2,
        )
    else:
        checks.add(
            "tokenizer_max_length",
            "pass",
            f"{', '.join(f'{w} {n}' for w, n in claims)} within the model's {usable} positions ({limit_from})",
            CODE,
            PATH,
            **ev2,
        )
