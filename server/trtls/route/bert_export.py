"""ONNX export of a Hugging Face BERT encoder (`model_type = "bert"`) from its safetensors weights, with onnx.helper.

No torch and nothing from the checkpoint is run: the graph is written op by op from `config.json`
(`hidden_size`, `num_attention_heads`, `num_hidden_layers`, `layer_norm_eps`, `hidden_act = "gelu"`) and the
weights become initializers. Two dynamic inputs, `input_ids` and `attention_mask` (int64 `[batch, sequence]`);
output `last_hidden_state` (`[batch, sequence, hidden]`). Token types are all 0 (single-segment input).
The math is `checkpoint.forward.bert_forward`'s, which gate 4 uses as the independent reference.

With `pooling` (a sentence-transformers checkpoint: `route.pooling` reads its modules.json), a second output
`sentence_embedding` (`[batch, hidden]`), as sentence-transformers' Pooling module defines it:

* `mean`: Σ(token · mask) / max(Σ mask, 1e-9) over the sequence;
* `mean_sqrt_len`: Σ(token · mask) / √max(Σ mask, 1e-9);
* `max`: the maximum over the sequence, masked tokens replaced by -1e9;
* `cls`: the first token's state;

then, with `normalize` (a Normalize module), x / max(‖x‖₂, 1e-12).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

OPSET = 17


class BertExportError(Exception):
    pass


class _Graph:
    def __init__(self) -> None:
        self.nodes: list[Any] = []
        self.inits: list[Any] = []
        self.n = 0
        self.names: set[str] = set()

    def const(self, name: str, value: np.ndarray) -> str:
        """An initializer (once per name: the shared constants are used by every layer)."""
        from onnx import numpy_helper

        if name in self.names:
            return name
        self.names.add(name)
        self.inits.append(numpy_helper.from_array(np.ascontiguousarray(value), name))
        return name

    def op(self, op_type: str, inputs: list[str], **attrs: Any) -> str:
        from onnx import helper

        self.n += 1
        out = f"{op_type.lower()}_{self.n}"
        self.nodes.append(helper.make_node(op_type, inputs, [out], name=f"{op_type}_{self.n}", **attrs))
        return out


POOLING_MODES = ("cls", "mean", "max", "mean_sqrt_len")


def _pool(g: _Graph, x: str, mode: str, normalize: bool) -> str:
    """`sentence_embedding` [batch, hidden] from the token states `x` [batch, sequence, hidden] (module doc)."""
    from onnx import TensorProto

    i64 = lambda name, *v: g.const(name, np.array(v, dtype=np.int64))  # noqa: E731
    f32 = lambda name, v: g.const(name, np.array(v, dtype=np.float32))  # noqa: E731
    if mode == "cls":
        first = g.op("Gather", [x, i64("pool_cls_index", 0)], axis=1)  # [batch, 1, hidden]
        pooled = g.op("Squeeze", [first, i64("axis_1", 1)])
    else:
        mask = g.op("Unsqueeze", [g.op("Cast", ["attention_mask"], to=TensorProto.FLOAT), i64("axes_last", -1)])
        if mode == "max":
            keep = g.op("Cast", [mask], to=TensorProto.BOOL)
            pooled = g.op("ReduceMax", [g.op("Where", [keep, x, f32("pool_masked", -1e9)])], axes=[1], keepdims=0)
        else:
            total = g.op("ReduceSum", [g.op("Mul", [x, mask]), i64("axis_1", 1)], keepdims=0)
            count = g.op("Max", [g.op("ReduceSum", [mask, "axis_1"], keepdims=0), f32("pool_min_count", 1e-9)])
            pooled = g.op("Div", [total, count if mode == "mean" else g.op("Sqrt", [count])])
    if normalize:
        norm = g.op("Max", [g.op("ReduceL2", [pooled], axes=[1], keepdims=1), f32("norm_eps", 1e-12)])
        pooled = g.op("Div", [pooled, norm])
    return pooled


def export_bert(
    weights: Mapping[str, np.ndarray],
    config: Mapping[str, Any],
    *,
    pooling: str | None = None,
    normalize: bool = False,
) -> Any:
    """`onnx.ModelProto` of the BERT encoder (see the module doc). BertExportError when the checkpoint does not fit."""
    from onnx import TensorProto, checker, helper

    if pooling is not None and pooling not in POOLING_MODES:
        raise BertExportError(f"bert exporter: pooling mode {pooling!r} is not exported ({', '.join(POOLING_MODES)})")

    prefix = next((p for p in ("", "bert.") if f"{p}embeddings.word_embeddings.weight" in weights), None)
    if prefix is None:
        raise BertExportError("bert exporter: no embeddings.word_embeddings.weight tensor")
    if str(config.get("hidden_act", "gelu")) != "gelu":
        raise BertExportError(f"bert exporter: hidden_act {config.get('hidden_act')!r} is not supported (gelu)")
    try:
        heads = int(config["num_attention_heads"])
        layers = int(config["num_hidden_layers"])
    except (KeyError, TypeError, ValueError) as exc:
        raise BertExportError(
            f"bert exporter: config.json needs num_attention_heads and num_hidden_layers ({exc})"
        ) from None
    eps = float(config.get("layer_norm_eps", 1e-12))

    def w(name: str) -> np.ndarray:
        full = prefix + name
        if full not in weights:
            alt = full.replace(".weight", ".gamma").replace(".bias", ".beta") if "LayerNorm" in full else None
            if alt is None or alt not in weights:
                raise BertExportError(f"bert exporter: no tensor {full!r}")
            full = alt
        arr = np.asarray(weights[full])
        if arr.dtype != np.float32:
            raise BertExportError(f"bert exporter: {full} is {arr.dtype}; only float32 weights are exported")
        return arr

    word = w("embeddings.word_embeddings.weight")
    hidden = word.shape[1]
    if hidden % heads:
        raise BertExportError(f"bert exporter: hidden size {hidden} is not a multiple of {heads} heads")
    dh = hidden // heads
    g = _Graph()

    def ln(x: str, base: str) -> str:
        return g.op(
            "LayerNormalization",
            [x, g.const(f"{base}.weight", w(f"{base}.weight")), g.const(f"{base}.bias", w(f"{base}.bias"))],
            axis=-1,
            epsilon=eps,
        )

    def dense(x: str, base: str) -> str:
        wt = g.const(f"{base}.weight_t", w(f"{base}.weight").T)  # MatMul takes [in, out]
        return g.op("Add", [g.op("MatMul", [x, wt]), g.const(f"{base}.bias", w(f"{base}.bias"))])

    i64 = lambda name, *v: g.const(name, np.array(v, dtype=np.int64))  # noqa: E731
    f32 = lambda name, v: g.const(name, np.array(v, dtype=np.float32))  # noqa: E731

    # embeddings
    x = g.op("Gather", [g.const("embeddings.word_embeddings.weight", word), "input_ids"], axis=0)
    # positions 0 … sequence-1: the first `sequence` rows of the position table (a Slice, so no Range is needed)
    seq = g.op("Slice", [g.op("Shape", ["input_ids"]), i64("dim1_start", 1), i64("dim1_end", 2)])
    pos_table = g.const("embeddings.position_embeddings.weight", w("embeddings.position_embeddings.weight"))
    x = g.op("Add", [x, g.op("Slice", [pos_table, i64("zero_1d", 0), seq, i64("axis0", 0)])])
    x = g.op("Add", [x, g.const("token_type_zero", w("embeddings.token_type_embeddings.weight")[0])])
    x = ln(x, "embeddings.LayerNorm")
    # attention mask → additive bias [batch, 1, 1, sequence]
    keep = g.op("Cast", ["attention_mask"], to=TensorProto.FLOAT)
    masked = g.op("Sub", [f32("one_f32", 1.0), keep])
    bias = g.op("Mul", [masked, f32("mask_min", np.finfo(np.float32).min)])
    bias = g.op("Unsqueeze", [bias, i64("axes_1_2", 1, 2)])
    heads_shape = i64("heads_shape", 0, 0, heads, dh)
    merge_shape = i64("merge_shape", 0, 0, hidden)
    scale = f32("attention_scale", 1.0 / math.sqrt(dh))
    for i in range(layers):
        lp = f"encoder.layer.{i}"

        def split(v: str) -> str:
            return g.op("Reshape", [v, heads_shape])

        q = g.op("Transpose", [split(dense(x, f"{lp}.attention.self.query"))], perm=[0, 2, 1, 3])
        k = g.op("Transpose", [split(dense(x, f"{lp}.attention.self.key"))], perm=[0, 2, 3, 1])
        v = g.op("Transpose", [split(dense(x, f"{lp}.attention.self.value"))], perm=[0, 2, 1, 3])
        scores = g.op("Add", [g.op("Mul", [g.op("MatMul", [q, k]), scale]), bias])
        probs = g.op("Softmax", [scores], axis=-1)
        ctx = g.op("Reshape", [g.op("Transpose", [g.op("MatMul", [probs, v])], perm=[0, 2, 1, 3]), merge_shape])
        x = ln(g.op("Add", [dense(ctx, f"{lp}.attention.output.dense"), x]), f"{lp}.attention.output.LayerNorm")
        h = dense(x, f"{lp}.intermediate.dense")
        erf = g.op("Erf", [g.op("Div", [h, f32("sqrt2", math.sqrt(2.0))])])
        h = g.op("Mul", [g.op("Mul", [h, g.op("Add", [erf, "one_f32"])]), f32("half", 0.5)])
        x = ln(g.op("Add", [dense(h, f"{lp}.output.dense"), x]), f"{lp}.output.LayerNorm")
    g.nodes.append(helper.make_node("Identity", [x], ["last_hidden_state"], name="output"))
    outputs = [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", "sequence", hidden])]
    if pooling is not None:
        pooled = _pool(g, x, pooling, normalize)
        g.nodes.append(helper.make_node("Identity", [pooled], ["sentence_embedding"], name="sentence_embedding"))
        outputs.append(helper.make_tensor_value_info("sentence_embedding", TensorProto.FLOAT, ["batch", hidden]))
    graph = helper.make_graph(
        g.nodes,
        "bert_encoder",
        [
            helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "sequence"]),
            helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "sequence"]),
        ],
        outputs,
        g.inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="trtls")
    model.ir_version = 8
    checker.check_model(model)
    return model
