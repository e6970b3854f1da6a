"""trtls's own BERT WordPiece tokenizer: an implementation independent of the `tokenizers` library, written from the
algorithm BERT's `tokenization.py` and transformers' `BertTokenizer` describe, reading the checkpoint's transformers
tokenizer files (vocab.txt, tokenizer_config.json) — not tokenizer.json. Gate 4 compares the two on the route's
`tokenizer_texts` (`parity.tokenizer_reference`): an export that changed the normalizer, the vocabulary or the
special-token template shows as differing ids.

The steps (BasicTokenizer, then WordPiece): drop NUL, U+FFFD and control characters, every whitespace character a
space; a space around each CJK ideograph; split on whitespace; lowercase and strip accents (NFD, marks removed) when
`do_lower_case` (`strip_accents` follows it unless set); split off every punctuation character; then greedy
longest-match-first WordPiece with `##` continuations, `[UNK]` for a word over 100 characters or one that cannot be
matched; `[CLS] … [SEP]` around the result. Special tokens written in the text stay whole.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

MAX_WORD_CHARS = 100


def _is_control(ch: str) -> bool:
    if ch in "\t\n\r":
        return False
    return unicodedata.category(ch).startswith("C")


def _is_whitespace(ch: str) -> bool:
    return ch in " \t\n\r" or unicodedata.category(ch) == "Zs"


def _is_punctuation(ch: str) -> bool:
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True  # every non-alphanumeric ASCII character, as BERT treats them
    return unicodedata.category(ch).startswith("P")


def _is_cjk(cp: int) -> bool:
    return (
        0x4E00 <= cp <= 0x9FFF
        or 0x3400 <= cp <= 0x4DBF
        or 0x20000 <= cp <= 0x2A6DF
        or 0x2A700 <= cp <= 0x2B73F
        or 0x2B740 <= cp <= 0x2B81F
        or 0x2B820 <= cp <= 0x2CEAF
        or 0xF900 <= cp <= 0xFAFF
        or 0x2F800 <= cp <= 0x2FA1F
    )


@dataclass(frozen=True)
class WordPiece:
    vocab: Mapping[str, int]
    lowercase: bool = True
    strip_accents: bool | None = None  # None: follows lowercase
    chinese_chars: bool = True
    unk: str = "[UNK]"
    cls: str = "[CLS]"
    sep: str = "[SEP]"
    specials: tuple[str, ...] = ()  # written in a text, kept whole

    def _basic(self, text: str) -> list[str]:
        clean = "".join(
            " " if _is_whitespace(ch) else ch
            for ch in text
            if not (ord(ch) == 0 or ord(ch) == 0xFFFD or _is_control(ch))
        )
        if self.chinese_chars:
            clean = "".join(f" {ch} " if _is_cjk(ord(ch)) else ch for ch in clean)
        words: list[str] = []
        strip = self.lowercase if self.strip_accents is None else self.strip_accents
        for word in clean.split():
            if self.lowercase:
                word = word.lower()
            if strip:
                word = "".join(c for c in unicodedata.normalize("NFD", word) if unicodedata.category(c) != "Mn")
            piece = ""
            for ch in word:
                if _is_punctuation(ch):
                    words += [piece] if piece else []
                    words.append(ch)
                    piece = ""
                else:
                    piece += ch
            words += [piece] if piece else []
        return words

    def _wordpiece(self, word: str) -> list[str]:
        if len(word) > MAX_WORD_CHARS:
            return [self.unk]
        out, start = [], 0
        while start < len(word):
            end = len(word)
            while end > start:
                sub = word[start:end] if start == 0 else "##" + word[start:end]
                if sub in self.vocab:
                    break
                end -= 1
            if end == start:
                return [self.unk]
            out.append(sub)
            start = end
        return out

    def tokens(self, text: str) -> list[str]:
        parts = re.split("(" + "|".join(re.escape(s) for s in self.specials) + ")", text) if self.specials else [text]
        out = [self.cls]
        for part in parts:
            if part in self.specials:
                out.append(part)
            else:
                out += [p for w in self._basic(part) for p in self._wordpiece(w)]
        return out + [self.sep]

    def encode(self, text: str) -> list[int]:
        return [self.vocab[t] if t in self.vocab else self.vocab[self.unk] for t in self.tokens(text)]


def read_wordpiece(vocab_lines: Sequence[str], config: Mapping[str, object]) -> WordPiece | str:
    """The tokenizer transformers' BertTokenizer builds from vocab.txt and tokenizer_config.json, or why there is
    none (a tokenizer class that is not BERT's WordPiece)."""
    cls_name = config.get("tokenizer_class")
    if isinstance(cls_name, str) and cls_name not in ("BertTokenizer", "BertTokenizerFast"):
        return f"tokenizer_config.json names {cls_name}, not BERT's WordPiece: trtls has no independent implementation"
    vocab: dict[str, int] = {}
    for i, line in enumerate(vocab_lines):
        vocab.setdefault(line.rstrip("\n").rstrip("\r"), i)
    names = {k: config.get(f"{k}_token") for k in ("unk", "cls", "sep", "pad", "mask")}
    tokens = {
        k: v if isinstance(v, str) else default
        for (k, v), default in zip(names.items(), ("[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]"), strict=True)
    }
    missing = [t for k, t in tokens.items() if k in ("unk", "cls", "sep") and t not in vocab]
    if missing:
        return f"vocab.txt has no {', '.join(missing)}"
    strip = config.get("strip_accents")
    return WordPiece(
        vocab,
        lowercase=bool(config.get("do_lower_case", True)),
        strip_accents=strip if isinstance(strip, bool) else None,
        chinese_chars=bool(config.get("tokenize_chinese_chars", True)),
        unk=tokens["unk"],
        cls=tokens["cls"],
        sep=tokens["sep"],
        specials=tuple(sorted({t for t in tokens.values() if t in vocab}, key=len, reverse=True)),
    )
