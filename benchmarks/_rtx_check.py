"""Polygraphy's `--check` for bench_reduce_vs_polygraphy.py: a plain TensorRT-RTX build of one ONNX model, no trtls.

    python _rtx_check.py MODEL.onnx [--smem KIB] [--profile JSON] [--count FILE]

Parse, one optimization profile (each input's shapes from `--profile` — {input: {min, opt, max}} — or the model's
own dims, a dynamic one taken as 1), the builder settings the recipe changes (`--smem`: tactic shared memory, KiB),
build. TensorRT's errors and the parser's go to stderr, where Polygraphy's `--fail-regex` reads them; exit 1 when the
build fails, 0 when it builds. `--count FILE`: append one line per run (the benchmark counts Polygraphy's checks).
"""

import argparse
import json
import sys

import tensorrt_rtx as trt


class Errors(trt.ILogger):
    def __init__(self) -> None:
        trt.ILogger.__init__(self)

    def log(self, severity: trt.ILogger.Severity, msg: str) -> None:
        if severity in (trt.ILogger.Severity.INTERNAL_ERROR, trt.ILogger.Severity.ERROR):
            print(f"[E] {msg}", file=sys.stderr, flush=True)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--smem", type=int)
    ap.add_argument("--profile")
    ap.add_argument("--count")
    args = ap.parse_args()
    if args.count:
        with open(args.count, "a") as fh:
            fh.write("check\n")
    logger = Errors()
    builder = trt.Builder(logger)
    network = builder.create_network(0)
    parser = trt.OnnxParser(network, logger)
    if not parser.parse_from_file(args.model):
        for i in range(parser.num_errors):
            print(f"[E] ONNX parse failed: {parser.get_error(i)}", file=sys.stderr)
        return 1
    config = builder.create_builder_config()
    config.builder_optimization_level = 3
    if args.smem is not None:
        config.set_memory_pool_limit(trt.MemoryPoolType.TACTIC_SHARED_MEMORY, args.smem * 1024)
    given = json.loads(args.profile) if args.profile else {}
    profile = builder.create_optimization_profile()
    for i in range(network.num_inputs):
        tensor = network.get_input(i)
        if tensor.is_shape_tensor:
            continue
        own = [d if d >= 0 else 1 for d in tensor.shape]
        shapes = given.get(tensor.name) or {"min": own, "opt": own, "max": own}
        profile.set_shape(tensor.name, shapes["min"], shapes["opt"], shapes["max"])
    config.add_optimization_profile(profile)
    plan = builder.build_serialized_network(network, config)
    if plan is None:
        print("[E] build failed", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
