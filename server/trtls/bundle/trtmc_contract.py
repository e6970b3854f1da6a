"""The engine I/O TensorRT Model Connect's BERT runtime feeds and reads, and what a bundle's engine must therefore be.

Derived from TRTMC's own source at NVIDIA/TensorRT-Model-Connect e9132e79f (docs/gates.md, "What TRTMC's runtime
requires", has the table with every file and line):

* `EncoderPipeline::encode_ids` (src/runtime/models/bert/pipeline.cpp:116-159) feeds exactly two tensors,
  `input_ids` as int32 of shape `[n]` (no batch axis) and `attention_mask` as int32 `[n]` when the engine declares
  int32 for it, float32 `[n]` otherwise (`engine_mask_is_int32`, :46-52); n is the number of token ids, no padding.
* `TrtModuleImpl::forward_async` (src/runtime/backend/trt_module_impl.cpp:600-619) calls `setInputShape` with that
  shape without checking its result (`update_dynamic_shape`, :255-270) and copies min(bytes fed, bytes allocated)
  into the engine's buffer whatever its dtype; an input it is not fed keeps the profile's opt shape (:358); an int64
  engine tensor is treated as float32 (`from_trt_dtype`, :43-57). Buffers are allocated for profile 0's max (:325).
* The pipeline takes the *first* output, in `std::unordered_map` order (include/trtmc/runtime/tensor.h:57), whose
  name contains `logits`, `embed`, `output`, `hidden` or `score`, and copies numel × sizeof(float) bytes of it
  (pipeline.cpp:146-155): one such output, float32. `encode` keeps its first `hidden` values, `hidden` being the
  last axis of the first output (:17-22, :97-101): the output is the token states `[n, hidden]`.
* TRTMC's own BERT builder makes exactly that engine: `add_input("input_ids", trt.int32, (max_seq_length,))`, the
  same for `attention_mask`, token types as a constant (python/tensorrt_model_connect/families/bert/model.py:482-490),
  output `hidden_states` cast to float32 (:594-600); `max_seq_length` is the header's `max_cache_length` (:804, :812,
  :1005-1014, never above `max_position_embeddings`). It refuses TensorRT-RTX for BERT (:993-994, tested:
  tests/e2e/models/bert/test_bert_owned_build.py:204), while the runtime takes `engine_backend` from config.json and
  loads the `trt_rtx` backend for any strategy (src/runtime/registry/pipeline_factory.cpp:368-369): an RTX BERT bundle
  is loaded and run on a path TRTMC never builds nor tests, so it holds (`RTX_PROBLEM`), never passes silently.
* Nothing in TRTMC cuts a long request: its tokenizers never truncate (src/tokenizer/*.cpp), `encode_ids` feeds all
  n ids, `setInputShape` fails unchecked past profile 0's max and the copy is min(bytes) — a request longer than the
  profile's max but within the model's positions is answered from a cut input, silently wrong. So the engine must
  take every length the model has positions for, or the route must state the cap its service enforces
  (`routes.X.max_input_tokens` ≤ the profile's max).

A TensorRT-RTX engine cannot be deserialized without a GPU (IRuntime::deserializeCudaEngine needs the CUDA driver), so
the engine's I/O is read from the bundle's header `io_map`, which trtls's route build records from the ONNX the engine
was built from (TensorRT keeps the network's input and output names and dtypes) and the optimization profiles the
build recorded its builder config holding (the build summary's `optimizationProfiles`). A bundle with no `io_map`
(TRTMC's own writer records none) is `not checked` here, never passed."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

CONTRACT_STRATEGIES = frozenset({"bert_encoder_only"})  # the strategies whose runtime contract is written here
FED_INPUTS = ("input_ids", "attention_mask")  # pipeline.cpp:139-141
OUTPUT_MARKERS = ("logits", "embed", "output", "hidden", "score")  # pipeline.cpp:147-149
OUTPUT_NAME = "hidden_states"  # what TRTMC's BERT builder names it (families/bert/model.py:599)
MASK_DTYPES = ("int32", "float32")  # pipeline.cpp:127-137
PROFILES_FROM_RECIPE = "the engine recipe"  # exporters.engine_io's io_map.source.profiles when the build recorded none
RTX_PROBLEM = (
    "engine_backend trt_rtx: TRTMC's runtime would load this BERT engine through its TensorRT-RTX backend "
    "(pipeline_factory.cpp:368-369 loads whatever backend config.json names), but TRTMC's own BERT builder refuses "
    "TensorRT-RTX builds (families/bert/model.py:993-994, and its tests assert the refusal), so no TRTMC bundle is "
    'ever an RTX BERT engine and that path is untested by TRTMC; build the engine with builder_module = "tensorrt"'
)


def read_output(name: str) -> bool:
    """Whether TRTMC's encoder pipeline would take an output of this name (pipeline.cpp:147-149)."""
    return any(m in name for m in OUTPUT_MARKERS)


def _dims(value: Any) -> list[Any] | None:
    return list(value) if isinstance(value, list) else None


def _profile(entry: Mapping[str, Any]) -> dict[str, Any] | None:
    """Profile 0 of an io_map input ({min, opt, max}), the one TRTMC's module selects (trt_module_impl.cpp:325)."""
    profiles = entry.get("profiles")
    if isinstance(profiles, list) and profiles and isinstance(profiles[0], dict):
        return profiles[0]
    profile = entry.get("profile")
    return profile if isinstance(profile, dict) else None


def contract_problems(
    header: Mapping[str, Any],
    strategy: Any,
    *,
    backend: Any = None,
    positions: Any = None,
    length_cap: int | None = None,
    routed: bool = False,
) -> tuple[list[str], list[str]]:
    """(problems, not_checked) of the engine `header["io_map"]` records against the runtime contract of `strategy`:
    each problem says what TRTMC does and what the engine declares; `not_checked` says what could not be read.
    `backend`: config.json's `engine_backend` (the header's when not given); `positions`: config.json's
    `max_position_embeddings`; `length_cap`: the longest request the route says its service lets through. Without
    `routed` (a bundle inspected on its own) no route can state a cap: requests over the engine's length are then
    `not_checked`, said, not a problem."""
    if strategy not in CONTRACT_STRATEGIES:
        return [], [f"engine I/O: trtls holds no runtime contract for strategy {strategy!r} (only bert_encoder_only)"]
    problems: list[str] = []
    if (backend if backend is not None else header.get("engine_backend")) == "trt_rtx":
        problems.append(RTX_PROBLEM)
    io_map = header.get("io_map")
    inputs = io_map.get("inputs") if isinstance(io_map, dict) else None
    outputs = io_map.get("outputs") if isinstance(io_map, dict) else None
    if not isinstance(inputs, dict) or not isinstance(outputs, dict):
        return problems, ["engine I/O: the bundle records no io_map, and the engine cannot be inspected without a GPU"]
    source = io_map.get("source") if isinstance(io_map, dict) else None
    if isinstance(source, dict) and source.get("profiles") == PROFILES_FROM_RECIPE:
        # exporters.engine_io fell back to the recipe: what the engine's profile 0 holds was never read back
        return problems + _static_problems(header, inputs, outputs, profiles=False), [
            "engine I/O profiles: the bundle's io_map took them from the engine recipe, not from the build (its "
            "summary recorded no optimizationProfiles), so profile 0's range, max_cache_length and the longest "
            "request TRTMC can feed are unread"
        ]
    problems += _static_problems(header, inputs, outputs, profiles=True)
    longest = _longest(inputs)
    over = length_problems(longest, positions, length_cap) if longest is not None else []
    if routed or length_cap is not None:
        return problems + over, []
    return problems, [f"{o} (no route here to state a cap)" for o in over]


def length_problems(longest: int, positions: Any, length_cap: int | None) -> list[str]:
    """Why requests over the engine's longest input reach TRTMC's runtime (module doc): empty when the engine takes
    every position the model has, or the route states a cap within it."""
    if length_cap is not None:
        if length_cap <= longest:
            return []
        return [
            f"the route's max_input_tokens {length_cap} is over the engine's longest input ({longest} tokens, profile "
            f"0's max): TRTMC's runtime never truncates, so requests of {longest + 1}-{length_cap} tokens would be "
            "answered from a cut input"
        ]
    if not isinstance(positions, int) or positions <= longest:
        return []
    return [
        f"the engine takes at most {longest} tokens (profile 0's max) but the model has {positions} positions, and "
        "TRTMC's runtime never truncates (its tokenizers have no truncation, src/tokenizer/; setInputShape's result is "
        "unchecked, trt_module_impl.cpp:269; the copy is min(bytes fed, bytes allocated), :613-616): a request of "
        f"{longest + 1}-{positions} tokens is answered silently wrong; build profile 0 up to {positions}, or state "
        f"the cap the service enforces with routes.<name>.max_input_tokens (at most {longest})"
    ]


def longest_request(io_map: Any) -> int | None:
    """The longest `input_ids` the engine an io_map records takes (a static length, or profile 0's max)."""
    inputs = io_map.get("inputs") if isinstance(io_map, Mapping) else None
    return _longest(inputs) if isinstance(inputs, Mapping) else None


def _longest(inputs: Mapping[str, Any]) -> int | None:
    entry = inputs.get("input_ids")
    if not isinstance(entry, dict):
        return None
    shape = _dims(entry.get("shape"))
    if shape and len(shape) == 1 and isinstance(shape[0], int) and shape[0] > 0:
        return shape[0]
    hi = _dims((_profile(entry) or {}).get("max"))
    return hi[-1] if hi and isinstance(hi[-1], int) else None


def _static_problems(
    header: Mapping[str, Any], inputs: Mapping[str, Any], outputs: Mapping[str, Any], *, profiles: bool
) -> list[str]:
    """The contract's points on names, dtypes, ranks and outputs, and (with `profiles`: the build recorded them) on
    profile 0's range and the header's max_cache_length."""
    problems: list[str] = []
    for name in inputs:
        if name not in FED_INPUTS:
            problems.append(
                f"engine input {name!r} is never fed: TRTMC's BERT pipeline sets only input_ids and attention_mask "
                "(pipeline.cpp:139-141), so it keeps the profile's opt shape (trt_module_impl.cpp:358)"
            )
    if "input_ids" not in inputs:
        problems.append("the engine has no input 'input_ids', which TRTMC's BERT pipeline feeds (pipeline.cpp:140)")
    lengths: dict[str, tuple[Any, Any]] = {}
    for name in FED_INPUTS:
        entry = inputs.get(name)
        if not isinstance(entry, dict):
            continue
        dtype, shape = entry.get("dtype"), _dims(entry.get("shape"))
        wanted = ("int32",) if name == "input_ids" else MASK_DTYPES
        if dtype not in wanted:
            problems.append(
                f"engine input {name!r} is {dtype}; TRTMC feeds {' or '.join(wanted)} "
                + (
                    "(pipeline.cpp:122-125) and copies those bytes into the engine's buffer unconverted"
                    if name == "input_ids"
                    else "(pipeline.cpp:127-137; an int64 tensor is taken for float32, trt_module_impl.cpp:43-57)"
                )
            )
        profile = _profile(entry)
        if shape is None or len(shape) != 1:
            problems.append(
                f"engine input {name!r} has shape {shape}; TRTMC sets shape [n] (rank 1, no batch axis: "
                "pipeline.cpp:124, :131) and does not check setInputShape (trt_module_impl.cpp:269)"
            )
            lo, hi = _dims((profile or {}).get("min")), _dims((profile or {}).get("max"))
            if lo and hi and profiles:
                lengths[name] = (lo[-1], hi[-1])  # the sequence axis, for the header check below
            continue
        if isinstance(shape[0], int) and shape[0] > 0:
            lengths[name] = (shape[0], shape[0])  # a static length
        elif not profiles:
            continue  # the recorded profile is the recipe's: not the engine's (not_checked above)
        elif profile is None:
            problems.append(f"engine input {name!r} is dynamic and the bundle records no profile for it")
        else:
            lo, hi = _dims(profile.get("min")), _dims(profile.get("max"))
            if not lo or not hi or len(lo) != 1 or len(hi) != 1:
                problems.append(f"engine input {name!r}: profile 0 {profile} is not rank 1")
                continue
            if lo[0] != 1:
                problems.append(
                    f"engine input {name!r}: profile 0 starts at {lo[0]} tokens; TRTMC feeds any tokenized length "
                    "down to 1 (no padding, pipeline.cpp:117)"
                )
            lengths[name] = (lo[0], hi[0])
    if len(set(lengths.values())) > 1:
        problems.append(f"input_ids and attention_mask have different length ranges {lengths}; TRTMC feeds both [n]")
    cache = header.get("max_cache_length")
    longest = max((hi for _, hi in lengths.values()), default=None)
    if longest is not None and cache != longest and (profiles or len(lengths) == len(FED_INPUTS)):
        problems.append(
            f"header max_cache_length {cache} is not the engine's longest input ({longest} tokens): TRTMC's BERT "
            "builder makes the engine exactly max_cache_length long (families/bert/model.py:804, :812)"
        )
    taken = [n for n in outputs if read_output(str(n))]
    if not taken:
        problems.append(
            f"no engine output TRTMC reads: it takes an output whose name contains {', '.join(OUTPUT_MARKERS)} "
            f"(pipeline.cpp:146-149); the engine has {', '.join(map(str, outputs)) or 'none'}"
        )
    elif len(taken) > 1:
        problems.append(
            f"engine outputs {', '.join(map(repr, taken))} all match TRTMC's output rule; it takes the first in "
            "std::unordered_map order (pipeline.cpp:146, tensor.h:57), so which one is served is unspecified"
        )
    else:
        out = outputs[taken[0]] if isinstance(outputs[taken[0]], dict) else {}
        dtype, shape = out.get("dtype"), _dims(out.get("shape"))
        if dtype != "float32":
            problems.append(
                f"engine output {taken[0]!r} is {dtype}; TRTMC copies numel × sizeof(float) bytes of it "
                "(pipeline.cpp:150-152): float32"
            )
        hidden = header.get("hidden_size")
        if shape is None or len(shape) != 2 or (isinstance(hidden, int) and hidden and shape[-1] != hidden):
            problems.append(
                f"engine output {taken[0]!r} has shape {shape}; TRTMC reads token states [n, hidden] with hidden the "
                f"last axis (pipeline.cpp:17-22, :97-101; header hidden_size {hidden})"
            )
    return problems
