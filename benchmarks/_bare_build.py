"""The same build as `trtls build samples/quickstart --engine NAME`, with no trtls code at all.

A plain TensorRT-RTX script a person would write: import, parse the ONNX, one optimization profile,
build, write the engine (fsynced, as trtls does). bench_cli_fixed_cost.py runs it beside the CLI.
Usage: python _bare_build.py MODEL.onnx OUTPUT.engine
"""

import os
import sys

import tensorrt_rtx as trt


def main() -> int:
    onnx, output = sys.argv[1], sys.argv[2]
    logger = trt.Logger(trt.Logger.ERROR)
    builder = trt.Builder(logger)
    network = builder.create_network(0)
    parser = trt.OnnxParser(network, logger)
    if not parser.parse_from_file(onnx):
        print("parse failed", file=sys.stderr)
        return 1
    config = builder.create_builder_config()
    config.builder_optimization_level = 3
    profile = builder.create_optimization_profile()
    profile.set_shape("input", (1, 3, 32, 32), (4, 3, 32, 32), (8, 3, 32, 32))
    config.add_optimization_profile(profile)
    plan = builder.build_serialized_network(network, config)
    if plan is None:
        return 1
    with open(output, "wb") as fh:
        fh.write(plan)
        fh.flush()
        os.fsync(fh.fileno())
    return 0


if __name__ == "__main__":
    sys.exit(main())
