"""Token ids reported by a runtime-side command runner (runtimes.tokenize): real child processes, real tokenizers."""

from __future__ import annotations

import sys
from pathlib import Path

from tests.checkpoint._bert import make_bert_checkpoint

from trtls.gates.parity.tokenizer import TokenizerParity, check_tokenizer
from trtls.runtimes.tokenize import runtime_token_ids

RUNNER = """
import json, sys
from tokenizers import Tokenizer
tok = Tokenizer.from_file(sys.argv[1])
texts = json.load(open(sys.argv[2]))["texts"]
ids = [tok.encode(t).ids for t in texts]
if len(sys.argv) > 3 and sys.argv[3] == "drop-special":  # a runtime that forgets [CLS]/[SEP]
    ids = [i[1:-1] for i in ids]
print(json.dumps({"ids": ids}))
"""


def _runner(tmp_path: Path, *extra: str) -> list[str]:
    ck = make_bert_checkpoint(tmp_path / "ck")
    script = tmp_path / "runner.py"
    script.write_text(RUNNER)
    # argv: the runner, its tokenizer; runtime_token_ids appends the texts file (extra flags are passed before it
    # by a wrapper so the texts path stays last)
    if extra:
        wrapper = tmp_path / "wrapper.py"
        argv = f"[sys.executable, {str(script)!r}, {str(ck / 'tokenizer.json')!r}, sys.argv[1], *{list(extra)!r}]"
        wrapper.write_text(f"import subprocess, sys\nsys.exit(subprocess.call({argv}))\n")
        return [sys.executable, str(wrapper)]
    return [sys.executable, str(script), str(ck / "tokenizer.json")]


def test_ids_come_from_the_runner(tmp_path: Path) -> None:
    got = runtime_token_ids(_runner(tmp_path), ["the engine builds", "gate parity"], cwd=str(tmp_path), timeout_s=60)
    assert got.error is None and got.ids is not None and len(got.ids) == 2
    assert got.ids[0][0] == 2 and got.ids[0][-1] == 3  # [CLS] … [SEP], as the runner's tokenizer says


def test_gate_4_judges_a_runner_against_the_checkpoints_tokenizer(tmp_path: Path) -> None:
    """What the runner reports is compared with the reference tokenizer as trtls computes it (not the runner with
    itself): a faithful runner passes, one that drops [CLS]/[SEP] is rejected at the first id (TRT806)."""
    texts = ["the engine builds", "gate parity"]
    reference = tmp_path / "ck" / "tokenizer.json"

    def judged(*extra: str):
        got = runtime_token_ids(_runner(tmp_path, *extra), texts, cwd=str(tmp_path), timeout_s=60)
        assert got.error is None, got.error
        return check_tokenizer(TokenizerParity(reference=reference, texts=texts, under_test_ids=got.ids))

    faithful = judged()
    assert faithful.status == "pass" and faithful.evidence == {"texts": 2}, faithful.message
    dropped = judged("drop-special")
    assert dropped.status == "reject" and dropped.code == "TRT806", dropped.message
    assert dropped.evidence == {"text_index": 0, "position": 0} and "ids reported by the runtime" in dropped.message


def test_runner_failures_are_reasons_not_ids(tmp_path: Path) -> None:
    assert "not found" in (runtime_token_ids(["/no/such/runner"], ["x"], cwd=None, timeout_s=5).error or "")
    crash = runtime_token_ids([sys.executable, "-c", "import sys; sys.exit(3)"], ["x"], cwd=None, timeout_s=30)
    assert crash.ids is None and "exited 3" in (crash.error or "")
    junk = runtime_token_ids(
        [sys.executable, "-c", "print(json.dumps({'ids': 'no'}))".replace("json.dumps", "__import__('json').dumps")],
        ["x"],
        cwd=None,
        timeout_s=30,
    )
    assert junk.ids is None and "ids" in (junk.error or "")
    hang = runtime_token_ids([sys.executable, "-c", "import time; time.sleep(60)"], ["x"], cwd=None, timeout_s=1)
    assert hang.ids is None and "did not answer" in (hang.error or "")
