"""The same build as `trtls build samples/quickstart --engine NAME`, with no trtls code at all.

A plain TensorRT-RTX script a person would write: import, parse the ONNX, the recipe's optimization profiles
(`large` has 48), build, write the engine (fsynced, as trtls does). bench_cli_fixed_cost.py runs it beside the CLI.
Usage: python _bare_build.py MODEL.onnx OUTPUT.engine    (MODEL: a quickstart model, demo or large)
"""

import json
import os
import sys
import time
from pathlib import Path

import tensorrt_rtx as trt

T_IMPORTED_NS = time.monotonic_ns()  # the stages bench_cli_fixed_cost.py compares with the worker's events

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.quickstart import quickstart_profile_list  # noqa: E402


def prepared(onnx: str) -> tuple | None:
    """(logger, builder, network, parser, config) ready to build `onnx` with the recipe's profiles, or None when the
    parse fails. All five are returned: the network holds the parser's weights and the builder its logger."""
    logger = trt.Logger(trt.Logger.ERROR)
    builder = trt.Builder(logger)
    network = builder.create_network(0)
    parser = trt.OnnxParser(network, logger)
    if not parser.parse_from_file(onnx):
        return None
    config = builder.create_builder_config()
    config.builder_optimization_level = 3
    for p in quickstart_profile_list(Path(onnx).stem):
        profile = builder.create_optimization_profile()
        profile.set_shape(p["input"], p["min"], p["opt"], p["max"])
        config.add_optimization_profile(profile)
    return logger, builder, network, parser, config


def main() -> int:
    onnx, output = sys.argv[1], sys.argv[2]
    ready = prepared(onnx)
    if ready is None:
        print("parse failed", file=sys.stderr)
        return 1
    _, builder, network, _, config = ready
    t_call = time.monotonic_ns()
    plan = builder.build_serialized_network(network, config)
    t_return = time.monotonic_ns()
    if plan is None:
        return 1
    with open(output, "wb") as fh:
        fh.write(plan)
        fh.flush()
        os.fsync(fh.fileno())
    stamps = os.environ.get("TRTLS_BENCH_STAMPS")  # a file for the stages (CLOCK_MONOTONIC, as the worker's t_ns)
    if stamps:
        with open(stamps, "w") as fh:
            json.dump({"ready": T_IMPORTED_NS, "call": t_call, "return": t_return}, fh)
    return 0


if __name__ == "__main__":
    sys.exit(main())
