"""Generate the quickstart's ONNX models with onnx.helper: nothing downloaded, same bytes every run.

    python make_models.py [--out DIR]      # default: models/ next to this file

demo.onnx   builds in a few seconds with TensorRT-RTX on a 2-core CPU, with no TensorRT warning.
large.onnx  builds for about half a minute, and keeps reporting progress while it does, so a Stop
            is seen within a second or two.

Why the models look the way they do (measured with tensorrt_rtx 1.7 on the CPU):
- TensorRT-RTX hands the whole network to one Myelin compile, reported as a single step of
  "Computing profile costs": a long conv chain gave one silent stretch of 9 s in a 10 s build.
  That is fine for `demo` (one compile unit, ~2-3 s silent, no cut, no warning).
- `large` is cut: a Reshape whose target shape is computed from tensor *values* forces a
  device-to-host shape copy, which Myelin cannot swallow: the network is cut there into separate
  compile units, each reported as its own step. Each cut computes `Shape(x) + int(max(x) * 0)`,
  which always equals the current shape, so the model's output is unchanged.
- Every cut costs a TensorRT warning, twice per cut tensor ("Was not able to infer kOPT value(s)
  for tensor cast_N. Using one(s)."), 112 in `large`: a shape computed on the device has no value
  TensorRT can know at the profile's opt point. No cut without it was found (issue 18):
  data-dependent Slice, Range, Tile, Expand, Pad, TopK, ConstantOfShape->ReduceMax, a random
  value, all cut and all warn; If and Loop on data, shape math in float (Cast, Mul, Sqrt, MatMul),
  Q/DQ, LSTM, GridSample, Einsum, Trilu, Hardmax, Mod, LRN, ScatterND, OneHot, ReverseSequence,
  ConvTranspose, DepthToSpace, fp16/int32/bool round trips all merge into one compile (no cut);
  NonZero and DFT need plugins TensorRT-RTX lacks; NonMaxSuppression has no CPU runner. Uncut,
  `large` would be one silent compile of over a minute: a Stop would wait for all of it.
- A warning-free way that keeps the progress, measured 2026-12-02 and not adopted yet: optimization
  *profiles* are compiled one by one, a progress step apart, with no warning. The uncut graph
  (3 segments x 16 norms) with 48 fixed-batch profiles (min = opt = max = [b, 3, 32, 32], b = 1..48)
  built in 29.4 CPU-s with 0 warnings, longest silent stretch 0.61 CPU-s (the cut model: 1.48),
  a 105 MB engine, 0.5 GB peak RSS (1.3 GB), and a Stop at 3, 8 or 15 s ended `cancelled` in
  0.25-0.63 s (9 runs). Not adopted within that session because the engine then runs only at
  batches 1..48 exactly (a caller picks the profile), the recipe carries 48 profiles, and the
  terminal's plain tree folds only leaf phases: ~245 rows instead of ~11.
- LayerNormalization costs the Myelin compiler the most per node among the ops tried
  (conv, matmul, softmax, pooling, transpose, tanh), so few nodes buy much build time, and the
  graph-wide phases (whose silent stretches grow with the node count) stay short.
- A segment's compile time grows faster than its size (20 norms: 0.27 s, 30: 0.43 s, 40: 1-3 s)
  while each segment adds ~2 MB of engine: 30 norms per segment balances gap length, engine
  size and build time.

Measured (tensorrt_rtx 1.7.1, 2 cores, one profile 1/4/8 x 3x32x32, optimization level 3;
CPU seconds, which equal wall seconds on an idle machine; wall time stretches under load):
  demo   ~3 s, one compile unit (longest gap ~2-3 s, the compile), 2.6 MB engine, no warning
  large 30.6 s, 10739 callbacks, longest gap 1.5 s (graph-wide "Computing profile costs"),
        all others <= 0.7 s, 123 MB engine, ~1.3 GB peak RSS

The input has a dynamic batch dimension ([-1, 3, 32, 32], named "input") so a recipe needs an
optimization profile; the output is "output" [-1, 16].
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

GENERATOR_VERSION = 3  # 2: the cut reshapes say allowzero=1 (TensorRT warned 4 times per cut); 3: demo uncut
SEED = 20261129
CHANNELS = 16
SIZE = 32
OPSET = 17

# segments: conv + norms LayerNormalizations each; cut: a value-dependent reshape ends each segment,
# making it a compile unit of its own (and a TensorRT kOPT warning, see above).
MODELS = {
    "demo": {"segments": 2, "norms": 16, "cut": False},
    "large": {"segments": 56, "norms": 30, "cut": True},
}


def build_model(name: str, segments: int, norms: int, cut: bool, seed: int = SEED) -> onnx.ModelProto:
    rng = np.random.default_rng([seed, segments, norms])
    nodes: list[onnx.NodeProto] = []
    inits: list[onnx.TensorProto] = []
    counter = 0

    def fresh(prefix: str) -> str:
        nonlocal counter
        counter += 1
        return f"{prefix}_{counter}"

    def const(array: np.ndarray, prefix: str) -> str:
        tensor_name = fresh(prefix)
        inits.append(numpy_helper.from_array(array, tensor_name))
        return tensor_name

    def node(op: str, inputs: list[str], **attrs: object) -> str:
        out = fresh(op.lower())
        nodes.append(helper.make_node(op, inputs, [out], name=out, **attrs))
        return out

    def conv(x: str, cin: int) -> str:
        w = (rng.standard_normal((CHANNELS, cin, 3, 3)) / np.sqrt(cin * 9)).astype(np.float32)
        b = (rng.standard_normal(CHANNELS) * 0.01).astype(np.float32)
        return node("Conv", [x, const(w, "conv_w"), const(b, "conv_b")], pads=[1, 1, 1, 1])

    x = node("Relu", [conv("input", 3)])
    for _ in range(segments):
        x = node("Relu", [conv(x, CHANNELS)])
        for _ in range(norms):
            scale = (1.0 + 0.1 * rng.standard_normal(SIZE)).astype(np.float32)
            bias = (0.1 * rng.standard_normal(SIZE)).astype(np.float32)
            x = node("LayerNormalization", [x, const(scale, "ln_scale"), const(bias, "ln_bias")], axis=-1)
        if not cut:
            continue
        # The cut: a Reshape to Shape(x) + int64(max(x) * 0), i.e. to its own shape, computed from values.
        zero = node(
            "Cast",
            [node("Mul", [node("ReduceMax", [x], keepdims=0), const(np.array(0.0, np.float32), "zero")])],
            to=TensorProto.INT64,
        )
        # allowzero=1: a 0 in the target is a 0, not "copy this dimension" (TensorRT warned, per dimension, that a
        # placeholder it cannot see the value of "is usually a sign of a bug in the network").
        x = node("Reshape", [x, node("Add", [node("Shape", [x]), zero])], allowzero=1)
    pooled = node("GlobalAveragePool", [x])
    nodes.append(helper.make_node("Flatten", [pooled], ["output"], name="flatten_output"))

    graph = helper.make_graph(
        nodes,
        f"trtls_quickstart_{name}",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [-1, 3, SIZE, SIZE])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [-1, CHANNELS])],
        inits,
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="trtls make_models.py"
    )
    model.ir_version = 8  # readable by every onnx >= 1.10 and by the TensorRT parsers
    model.doc_string = f"trtls quickstart model {name!r}: synthetic, random fixed weights (seed {seed})."
    helper.set_model_props(
        model,
        {
            "generator": "trtls/samples/quickstart/make_models.py",
            "generator_version": str(GENERATOR_VERSION),
            "seed": str(seed),
            "segments": str(segments),
            "norms": str(norms),
            "cut": str(cut).lower(),
        },
    )
    onnx.checker.check_model(model)
    return model


def spec_key(name: str) -> str:
    return json.dumps(
        {
            "name": name,
            "version": GENERATOR_VERSION,
            "seed": SEED,
            "channels": CHANNELS,
            "size": SIZE,
            "opset": OPSET,
            **MODELS[name],
        },
        sort_keys=True,
    )


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def write_model(name: str, out: Path) -> str:
    """Write out/<name>.onnx unless the marker says the same spec already produced the bytes there."""
    path = out / f"{name}.onnx"
    marker = out / f".{name}.onnx.sha256"
    if path.exists() and marker.exists():
        recorded = json.loads(marker.read_text())
        if recorded.get("spec") == spec_key(name) and recorded.get("sha256") == sha256(path):
            return f"{path}: up to date (sha256 {recorded['sha256'][:12]})"
    data = build_model(name, **MODELS[name]).SerializeToString()
    tmp = path.with_suffix(".onnx.tmp")
    tmp.write_bytes(data)
    tmp.replace(path)
    digest = hashlib.sha256(data).hexdigest()
    marker.write_text(json.dumps({"spec": spec_key(name), "sha256": digest}) + "\n")
    return f"{path}: wrote {len(data) / 1e6:.1f} MB (sha256 {digest[:12]})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--out",
        type=Path,
        default=Path(__file__).resolve().parent / "models",
        help="directory for the .onnx files (default: models/ next to this script)",
    )
    parser.add_argument("--only", choices=sorted(MODELS), action="append", help="generate only this model")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for name in args.only or list(MODELS):
        print(write_model(name, args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
