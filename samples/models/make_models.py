"""Generate the model-support sample's ONNX models with onnx.helper: nothing downloaded, same bytes every run.

    python make_models.py [--out DIR]      # default: models/ next to this file

Each model is one shape of network users bring, small enough to build with TensorRT-RTX on a CPU in seconds:

encoder.onnx     a transformer-style encoder: two dynamic int64 inputs `input_ids` and `attention_mask`, both
                 [batch, seq]; embedding (Gather), masked self-attention, LayerNormalization, mean pooling →
                 `pooled` [batch, 64]. Every optimization profile must give both inputs' shapes.
detector.onnx    a conv detector with dynamic batch, height and width: `images` [batch, 3, height, width] →
                 `heatmap` [batch, 8, height/4, width/4].
tokens.onnx      an int64 input with one static dimension: `tokens` [batch, 16] → `logits` [batch, 4].
external.onnx    an MLP whose weights live in `external.onnx.data` (ONNX external data): `x` [batch, 256] →
                 `y` [batch, 256].
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

SEED = 20261201
OPSET = 17
VOCAB, HIDDEN = 1000, 64


class _Graph:
    """Nodes and initializers with fresh names (a tiny builder over onnx.helper)."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.count = 0

    def name(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}_{self.count}"

    def const(self, array: np.ndarray, prefix: str = "w") -> str:
        name = self.name(prefix)
        self.inits.append(numpy_helper.from_array(array, name))
        return name

    def weight(self, *shape: int) -> str:
        fan_in = shape[0] if len(shape) == 2 else int(np.prod(shape[1:]))
        return self.const((self.rng.standard_normal(shape) / np.sqrt(fan_in)).astype(np.float32))

    def op(self, op: str, inputs: list[str], out: str | None = None, **attrs: object) -> str:
        out = out or self.name(op.lower())
        self.nodes.append(helper.make_node(op, inputs, [out], name=out, **attrs))
        return out

    def model(
        self, name: str, inputs: list[onnx.ValueInfoProto], outputs: list[onnx.ValueInfoProto]
    ) -> onnx.ModelProto:
        graph = helper.make_graph(self.nodes, name, inputs, outputs, self.inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="trtls-samples")
        model.ir_version = 8
        onnx.checker.check_model(model)
        return model


def encoder() -> onnx.ModelProto:
    g = _Graph(SEED)
    emb = g.const((g.rng.standard_normal((VOCAB, HIDDEN)) * 0.02).astype(np.float32), "embedding")
    x = g.op("Gather", [emb, "input_ids"], axis=0)  # [b, s, h]
    mask = g.op("Cast", ["attention_mask"], to=TensorProto.FLOAT)  # [b, s]
    # additive attention bias: 0 where attended, -10000 where masked
    bias = g.op(
        "Mul", [g.op("Sub", [mask, g.const(np.array(1.0, np.float32))]), g.const(np.array(10000.0, np.float32))]
    )
    bias = g.op("Unsqueeze", [bias, g.const(np.array([1], np.int64), "axes")])  # [b, 1, s]
    for _ in range(2):
        q = g.op("MatMul", [x, g.weight(HIDDEN, HIDDEN)])
        k = g.op("MatMul", [x, g.weight(HIDDEN, HIDDEN)])
        v = g.op("MatMul", [x, g.weight(HIDDEN, HIDDEN)])
        scores = g.op("MatMul", [q, g.op("Transpose", [k], perm=[0, 2, 1])])
        scores = g.op("Add", [g.op("Mul", [scores, g.const(np.array(HIDDEN**-0.5, np.float32))]), bias])
        attended = g.op("MatMul", [g.op("Softmax", [scores], axis=-1), v])
        scale, shift = g.const(np.ones(HIDDEN, np.float32)), g.const(np.zeros(HIDDEN, np.float32))
        x = g.op("LayerNormalization", [g.op("Add", [x, attended]), scale, shift], axis=-1)
    # mean over the attended positions
    summed = g.op(
        "ReduceSum",
        [
            g.op("Mul", [x, g.op("Unsqueeze", [mask, g.const(np.array([2], np.int64))])]),
            g.const(np.array([1], np.int64)),
        ],
        keepdims=0,
    )
    count = g.op("ReduceSum", [mask, g.const(np.array([1], np.int64))], keepdims=1)
    g.op("Div", [summed, g.op("Max", [count, g.const(np.array(1.0, np.float32))])], out="pooled")
    ids = helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"])
    am = helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "seq"])
    out = helper.make_tensor_value_info("pooled", TensorProto.FLOAT, ["batch", HIDDEN])
    return g.model("encoder", [ids, am], [out])


def detector() -> onnx.ModelProto:
    g = _Graph(SEED + 1)
    x = "images"
    for cin, cout in ((3, 16), (16, 32)):
        x = g.op(
            "Relu",
            [
                g.op(
                    "Conv",
                    [x, g.weight(cout, cin, 3, 3), g.const(np.zeros(cout, np.float32))],
                    pads=[1, 1, 1, 1],
                    strides=[2, 2],
                )
            ],
        )
    g.op("Sigmoid", [g.op("Conv", [x, g.weight(8, 32, 1, 1)])], out="heatmap")
    images = helper.make_tensor_value_info("images", TensorProto.FLOAT, ["batch", 3, "height", "width"])
    out = helper.make_tensor_value_info("heatmap", TensorProto.FLOAT, ["batch", 8, "out_h", "out_w"])
    return g.model("detector", [images], [out])


def tokens() -> onnx.ModelProto:
    g = _Graph(SEED + 2)
    x = g.op("Gather", [g.const((g.rng.standard_normal((VOCAB, 32)) * 0.1).astype(np.float32)), "tokens"], axis=0)
    x = g.op("Flatten", [x], axis=1)  # [b, 16*32]
    g.op("Gemm", [x, g.weight(16 * 32, 4)], out="logits")
    tok = helper.make_tensor_value_info("tokens", TensorProto.INT64, ["batch", 16])
    out = helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 4])
    return g.model("tokens", [tok], [out])


def mlp() -> onnx.ModelProto:
    g = _Graph(SEED + 3)
    x = "x"
    for n in range(3):
        x = g.op("Gemm", [x, g.weight(256, 256), g.const(np.zeros(256, np.float32))])
        x = g.op("Relu", [x]) if n < 2 else g.op("Identity", [x], out="y")
    xi = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 256])
    out = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 256])
    return g.model("external", [xi], [out])


def write_all(out: Path) -> list[Path]:
    """Write every model into `out`. Each file is replaced atomically, and only when its bytes differ: a test run in
    several processes calls this once in each while others read the models (a rewrite in place tore their reads)."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    with tempfile.TemporaryDirectory(dir=out, prefix=".make-") as tmp:
        for name, make in (("encoder", encoder), ("detector", detector), ("tokens", tokens)):
            onnx.save(make(), Path(tmp) / f"{name}.onnx")
            written.append(out / f"{name}.onnx")
        onnx.save(
            mlp(),
            Path(tmp) / "external.onnx",
            save_as_external_data=True,
            all_tensors_to_one_file=True,
            location="external.onnx.data",
            size_threshold=0,
        )
        written += [out / "external.onnx.data", out / "external.onnx"]  # its data in place before the model
        for path in written:
            made = Path(tmp) / path.name
            if not path.is_file() or path.read_bytes() != made.read_bytes():
                os.replace(made, path)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "models")
    args = parser.parse_args(argv)
    for path in write_all(args.out):
        print(f"{path}: {path.stat().st_size / 1e6:.2f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
