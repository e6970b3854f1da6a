"""`parity.malformed`'s oversized case on a real two-input model through ONNX Runtime: every input is enlarged
consistently (a two-input encoder gets an oversized batch, not a shape mismatch), just over the cap."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper

from trtls.gates.parity.robustness import check_malformed, oversized_case
from trtls.runtimes import RuntimeSpec


def two_input_model(path: Path) -> Path:
    a = helper.make_tensor_value_info("input_ids", TensorProto.FLOAT, ["batch", 4])
    b = helper.make_tensor_value_info("attention_mask", TensorProto.FLOAT, ["batch", 4])
    out = helper.make_tensor_value_info("hidden", TensorProto.FLOAT, ["batch", 8])
    graph = helper.make_graph(
        [helper.make_node("Concat", ["input_ids", "attention_mask"], ["hidden"], axis=1)], "two", [a, b], [out]
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def test_oversized_enlarges_every_input_consistently_just_over_the_cap():
    feed = {"input_ids": np.ones((2, 4), np.int64), "attention_mask": np.ones((2, 4), np.int64)}
    case, big, desc = oversized_case(feed, 4096)
    assert case == "oversized" and big is not None
    assert big["input_ids"].shape == big["attention_mask"].shape and big["input_ids"].shape[1] == 4
    total = sum(a.nbytes for a in big.values())
    assert 4096 < total <= 4096 + 2 * 4 * 8  # just over the cap: no more work than it forces
    assert "'input_ids', 'attention_mask'" in desc


def test_a_two_input_model_answers_the_oversized_batch_instead_of_a_shape_mismatch(tmp_path):
    spec = RuntimeSpec("onnxruntime", str(two_input_model(tmp_path / "two.onnx")), max_input_bytes=4096, timeout_s=60)
    feed = {"input_ids": np.ones((1, 4), np.float32), "attention_mask": np.zeros((1, 4), np.float32)}
    check = check_malformed(spec, feed, ())
    oversized = check.evidence["cases"]["oversized"]
    assert oversized["outcome"] == "answered", oversized
    assert "hidden (" in oversized["detail"]


def test_the_oversized_probe_bounds_its_own_work_on_a_real_six_layer_encoder(tmp_path):
    """Default runtime_options (64 MiB cap): the smallest batch over it would be ~260,000 rows of a 6-layer BERT at
    sequence 16 (gigabytes of output, minutes on a CPU). The probe runs at a lowered cap, with a bounded batch, and
    the runtime answers it within its timeout: no 'hang' that is only work."""
    import asyncio
    import time

    from tests.checkpoint._bert import bert_feed, make_bert_checkpoint

    from trtls.gates.parity.robustness import OVERSIZED_MAX_OUTPUT_BYTES, OVERSIZED_MAX_ROWS
    from trtls.route.build import build_route
    from trtls.runtimes.contract import DEFAULT_MAX_INPUT_BYTES

    make_bert_checkpoint(tmp_path / "ck", layers=6)
    (tmp_path / "trtls.toml").write_text(
        '[routes.b]\nonnx = "b.onnx"\ncheckpoint = { path = "ck", revision = "' + "c" * 40 + '" }\n'
        'intended_use = "t"\nallowed_licenses = ["apache-2.0"]\nbundle = "b.bundle"\nruntime = "onnxruntime"\n'
    )
    assert asyncio.run(build_route(tmp_path / "trtls.toml", "b")).ok
    spec = RuntimeSpec("onnxruntime", str(tmp_path / "b.onnx"))  # default runtime_options
    assert spec.max_input_bytes == DEFAULT_MAX_INPUT_BYTES
    feed = bert_feed(batch=2, seq=16)
    t0 = time.monotonic()
    check = check_malformed(spec, feed, ())
    took = time.monotonic() - t0
    oversized = check.evidence["cases"]["oversized"]
    bound = oversized["bound"]
    assert bound["rows_at_cap"] > 200_000  # what the unbounded probe ran
    rows = int(oversized["input"].split(" with ")[1].split(" rows")[0])
    assert rows <= OVERSIZED_MAX_ROWS and rows * bound["output_bytes_per_row"] <= OVERSIZED_MAX_OUTPUT_BYTES
    assert (
        bound["bounded_cap"] < DEFAULT_MAX_INPUT_BYTES
        and f"over the {bound['bounded_cap']}-byte cap" in (oversized["input"])
    )
    assert oversized["outcome"] in ("answered", "clean"), oversized
    assert check.status == "pass", check.message
    assert took < spec.timeout_s, took
