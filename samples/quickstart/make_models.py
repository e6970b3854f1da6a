"""Generate the quickstart's ONNX models with onnx.helper: nothing downloaded, same bytes every run.

    python make_models.py [--out DIR]      # default: models/ next to this file

demo.onnx   builds in a few seconds with TensorRT-RTX on a 2-core CPU, with no TensorRT warning.
large.onnx  builds for about half a minute with no TensorRT warning, and keeps reporting progress while it
            does, so a Stop is seen within a second.

Why the models look the way they do (measured with tensorrt_rtx 1.7 on the CPU):
- TensorRT-RTX hands the whole network to one Myelin compile per optimization profile, reported as one
  step of "Computing profile costs": a long conv chain gave one silent stretch of 9 s in a 10 s build. That
  is fine for `demo` (one profile, one compile, ~2-3 s silent).
- `large` is the same kind of small graph (3 segments x 16 norms) built for 48 optimization profiles, one
  tuned for each batch size 1..48 (min 1, opt b, max 48: every profile accepts every batch up to 48, so the
  engine runs any batch in that range). TensorRT-RTX compiles the profiles one by one, a progress step
  apart: 48 compiles of ~0.6 CPU-s each, so a Stop waits at most ~0.6 s of CPU for the builder's next
  callback, and nothing in it makes TensorRT warn. The recipe (trtls.toml) lists the 48 profiles.
- The design it replaced (generator version 3, issue 18) cut one graph into 56 compile units with
  value-dependent reshapes, which cost 112 TensorRT warnings ("Was not able to infer kOPT value(s) for tensor
  cast_N"); every other cut tried (data-dependent Slice, Range, Tile, Expand, Pad, TopK, ...) warned too, and
  uncut the graph was one silent compile of over a minute. Measured side by side (2 cores, one run each,
  CPU s): the cut model 30.6 CPU-s, longest gap 1.48 CPU-s, 123 MB engine, 1.3 GB peak RSS, 112 warnings;
  48 fixed-batch profiles 29.4 CPU-s, 0.61, 105 MB, 0.5 GB, 0 warnings; 40 overlapping profiles 25.3 CPU-s,
  0.63, 115 MB, 0.5 GB, 0 warnings.
- LayerNormalization costs the Myelin compiler the most per node among the ops tried
  (conv, matmul, softmax, pooling, transpose, tanh), so few nodes buy much build time, and the
  graph-wide phases (whose silent stretches grow with the node count) stay short.
- A compile's time grows faster than the graph (a segment of 20 norms: 0.27 s, 30: 0.43 s, 40: 1-3 s), so
  `large` buys its build time with profiles of a small graph, not with a bigger graph.

The input has a dynamic batch dimension ([-1, 3, 32, 32], named "input") so a recipe needs an
optimization profile; the output is "output" [-1, 16].
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

# 2: the cut reshapes say allowzero=1 (TensorRT warned 4 times per cut); 3: demo uncut; 4: large uncut too
# (its progress comes from the recipe's 48 profiles: no graph cut, no TensorRT warning)
GENERATOR_VERSION = 4
SEED = 20261129
CHANNELS = 16
SIZE = 32
OPSET = 17

# segments: conv + norms LayerNormalizations each. `large` is `demo`'s shape, one segment longer: its build
# time comes from its recipe's 48 optimization profiles (see above).
MODELS = {
    "demo": {"segments": 2, "norms": 16},
    "large": {"segments": 3, "norms": 16},
}


def build_model(name: str, segments: int, norms: int, seed: int = SEED) -> onnx.ModelProto:
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

    def node(op: str, inputs: list[str], **attrs: Any) -> str:
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
    tmp = path.with_suffix(f".onnx.{os.getpid()}.tmp")  # its own: test processes may write the same model at once
    tmp.write_bytes(data)
    tmp.replace(path)
    digest = hashlib.sha256(data).hexdigest()
    marker_tmp = marker.with_name(f"{marker.name}.{os.getpid()}.tmp")
    marker_tmp.write_text(json.dumps({"spec": spec_key(name), "sha256": digest}) + "\n")
    marker_tmp.replace(marker)
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
