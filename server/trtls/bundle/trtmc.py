"""What TensorRT Model Connect's header reader would see. It takes the first occurrence of a key anywhere in the
header JSON, so a top-level field that is missing is read from a nested one: a bundle whose header lacks `family`
but carries `provenance.family = "SPOOF"` loads as family SPOOF. `shadowed_fields` finds every such field."""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# The top-level fields TRTMC's runtime reads to pick a pipeline (bundle-format.md, pipeline_factory.cpp).
TRTMC_FIELDS = (
    "model_id",
    "model_type",
    "family",
    "trt_version",
    "trt_abi",
    "gpu_name",
    "precision",
    "quantization",
    "runtime_strategy",
    "engine_backend",
    "topology",
)


def _first_nested(value: Any, key: str, path: str) -> tuple[str, Any] | None:
    if isinstance(value, dict):
        for k, v in value.items():
            here = f"{path}.{k}" if path else str(k)
            if k == key and path:
                return here, v
            found = _first_nested(v, key, here)
            if found is not None:
                return found
    elif isinstance(value, list):
        for i, v in enumerate(value):
            found = _first_nested(v, key, f"{path}[{i}]")
            if found is not None:
                return found
    return None


def shadowed_fields(header: dict[str, Any]) -> list[dict[str, Any]]:
    """Each TRTMC field missing at the top level but present nested: {field, at, value} (first occurrence)."""
    out = []
    for key in TRTMC_FIELDS:
        if key in header:
            continue
        found = _first_nested(header, key, "")
        if found is not None:
            out.append({"field": key, "at": found[0], "value": found[1]})
    return out


# ---------------------------------------------------------------------------------------------- writing and loading
# What TRTMC's native loader (src/runtime/registry/pipeline_factory.cpp, read at NVIDIA/TensorRT-Model-Connect
# e9132e79f) takes from a bundle: the `config.json` section's `runtime_strategy` picks one registered pipeline plugin,
# its `engine_backend` ("trt", "trt_rtx", or "none") the backend DSO, and `trt_version` / `trt_abi` (major.minor) the
# TensorRT ABI that must match the installed runtime. The encoder plugins (`<family>_encoder_only`) read the engine
# from the section `engine_plan` and the tokenizer from `tokenizer.json`. Values are read as its reader reads them:
# the first occurrence of `"key":` anywhere in the text, a string value taken from the next quoted token.

# model_type → the strategy TRTMC registers for it (REGISTER_PIPELINE_PLUGIN_WITH_MANIFEST in
# src/runtime/models/<family>/plugin.cpp), for the model types trtls's route build exports.
RUNTIME_STRATEGIES: dict[str, str] = {"bert": "bert_encoder_only"}
# Every strategy TRTMC registers whose plugin trtls's reader knows the sections of (an encoder: `engine_plan`, or
# `engine_plan_tp_rank{N}` under tensor parallelism, and `tokenizer.json`).
ENCODER_STRATEGIES = frozenset(
    f"{f}_encoder_only"
    for f in (
        "albert",
        "bert",
        "convbert",
        "deberta",
        "distilbert",
        "dpr",
        "electra",
        "fnet",
        "modernbert",
        "mpnet",
        "roberta",
        "xlnet",
    )
)
ENGINE_BACKENDS: dict[str, str] = {"tensorrt": "trt", "tensorrt_rtx": "trt_rtx"}  # builder module → engine_backend
KNOWN_BACKENDS = ("trt", "trt_rtx", "none")
ENGINE_PLAN = "engine_plan"
CHECK_TRTMC_LOAD = "trtmc_load"  # a bundle problem: TRTMC's loader would misread or refuse the bundle
CONFIG = "config.json"
TOKENIZER = "tokenizer.json"
# The dispatch keys written first in config.json, so that the first occurrence of each is the dispatch record's.
DISPATCH_KEYS = ("runtime_strategy", "engine_backend", "trt_version", "trt_abi", "precision")

_MAJOR_MINOR = re.compile(r"(\d+)\.(\d+)")


def trt_abi(version: str) -> str:
    """The major.minor ABI TRTMC records for a TensorRT version ("" when the version has none)."""
    m = _MAJOR_MINOR.search(version or "")
    return f"{m.group(1)}.{m.group(2)}" if m else ""


def tokenizer_adds_special_tokens(tokenizer_json: bytes | None) -> bool:
    """Whether tokenizer.json frames the text with special tokens ([CLS] … [SEP]): it has a post-processor."""
    if not tokenizer_json:
        return False
    try:
        data = json.loads(tokenizer_json)
    except (ValueError, RecursionError):
        return False
    return isinstance(data, dict) and isinstance(data.get("post_processor"), dict)


def dispatch_config(
    hf_config: dict[str, Any],
    *,
    runtime_strategy: str,
    engine_backend: str,
    trt_version: str,
    precision: str,
    add_special_tokens: bool,
) -> dict[str, Any]:
    """The `config.json` section TRTMC dispatches on: the dispatch keys first, then the checkpoint's config.json
    (its `_`-private keys dropped, as TRTMC's own BERT writer does), then the tokenizer and layout fields."""
    record: dict[str, Any] = {
        "runtime_strategy": runtime_strategy,
        "engine_backend": engine_backend,
        "trt_version": trt_version,
        "trt_abi": trt_abi(trt_version),
        "precision": precision,
    }
    record.update((k, v) for k, v in hf_config.items() if not str(k).startswith("_") and k not in record)
    record["tokenizer_add_special_tokens"] = int(add_special_tokens)
    record["decoder_engine_layout"] = "single"
    return record


def first_value(text: str, key: str) -> tuple[bool, Any]:
    """(found, value) of the first `"key":` anywhere in `text`, as TRTMC's reader finds it."""
    for m in re.finditer(r'"' + re.escape(key) + r'"\s*:\s*', text):
        try:
            value, _ = json.JSONDecoder().raw_decode(text, m.end())
        except ValueError:
            continue
        return True, value
    return False, None


@dataclass
class TrtmcView:
    """A bundle as TRTMC's native loader sees it: header fields and config.json keys by first occurrence."""

    header: dict[str, Any]  # the parsed header (for the top-level fields)
    header_text: str
    sections: dict[str, int]  # name → size
    config: dict[str, Any] | None  # config.json parsed (None when missing or not a JSON object)
    config_text: str

    def header_field(self, key: str) -> Any:
        return first_value(self.header_text, key)[1]

    def dispatch(self, key: str) -> Any:
        return first_value(self.config_text, key)[1]

    def load_problems(self, length_cap: int | None = None, *, routed: bool = False) -> list[str]:
        """Why TRTMC's native loader would not load this bundle as an encoder pipeline, or its runtime would not run
        it as TRTMC supports (empty: nothing found). `length_cap`, `routed`: `trtmc_contract.contract_problems`'s."""
        problems = []
        if self.config is None:
            problems.append("no config.json section holding a JSON object (TRTMC's dispatch record)")
            return problems
        strategy = self.dispatch("runtime_strategy")
        if strategy not in ENCODER_STRATEGIES:
            problems.append(
                f"config.json runtime_strategy {strategy!r} is not a registered encoder strategy "
                f"({', '.join(sorted(ENCODER_STRATEGIES))})"
            )
        if not self.sections.get(ENGINE_PLAN) and not any(
            n.startswith("engine_plan_tp_rank") and size for n, size in self.sections.items()
        ):
            problems.append(f"no non-empty {ENGINE_PLAN!r} section (the encoder plugin's engine)")
        backend = self.dispatch("engine_backend")
        if backend not in KNOWN_BACKENDS:
            problems.append(f"config.json engine_backend {backend!r} is not one of {', '.join(KNOWN_BACKENDS)}")
        version, abi = self.dispatch("trt_version"), self.dispatch("trt_abi")
        if not isinstance(version, str) or not trt_abi(version):
            problems.append(f"config.json trt_version {version!r} has no major.minor")
        if not isinstance(abi, str) or not re.fullmatch(r"\d+\.\d+", abi):
            problems.append(f"config.json trt_abi {abi!r} is not major.minor")
        elif isinstance(version, str) and trt_abi(version) != abi:
            problems.append(f"config.json trt_abi {abi!r} is not trt_version {version!r}'s major.minor")
        for key in ("trt_version", "trt_abi", "runtime_strategy"):
            if key in self.header and self.dispatch(key) is not None and self.header_field(key) != self.dispatch(key):
                problems.append(
                    f"header {key} {self.header_field(key)!r} disagrees with config.json's {self.dispatch(key)!r}"
                )
        if not self.sections.get(TOKENIZER):
            problems.append(f"no non-empty {TOKENIZER!r} section (the encoder plugin's tokenizer)")
        for key in TRTMC_FIELDS:
            if key in self.header and self.header_field(key) != self.header[key]:
                problems.append(
                    f"header {key!r} is read as {self.header_field(key)!r} (an earlier occurrence), not the top-level "
                    f"{self.header[key]!r}"
                )
        problems += [
            f"header {f['field']!r} is missing at the top level and would be read from {f['at']}"
            for f in shadowed_fields(self.header)
        ]
        problems += self.engine_io(length_cap, routed=routed)[0]
        cache, positions = self.header.get("max_cache_length"), self.dispatch("max_position_embeddings")
        if isinstance(cache, int) and isinstance(positions, int) and cache > positions:
            problems.append(
                f"header max_cache_length {cache} exceeds config.json max_position_embeddings {positions} (TRTMC's "
                "BERT builder refuses that: families/bert/model.py:1011-1014)"
            )
        return problems

    def engine_io(self, length_cap: int | None = None, *, routed: bool = False) -> tuple[list[str], list[str]]:
        """(problems, not_checked) of the engine's recorded I/O against the runtime contract of its strategy
        (`bundle.trtmc_contract`), with config.json's engine_backend and max_position_embeddings as TRTMC reads them."""
        from trtls.bundle.trtmc_contract import contract_problems

        return contract_problems(
            self.header,
            self.dispatch("runtime_strategy"),
            backend=self.dispatch("engine_backend"),
            positions=self.dispatch("max_position_embeddings"),
            length_cap=length_cap,
            routed=routed,
        )


def read_trtmc(path: str | os.PathLike[str]) -> TrtmcView:
    """Read a bundle as TRTMC's loader would (container checked by `read_bundle` first; BundleError otherwise)."""
    from trtls.bundle.format import MAX_HEADER, PREAMBLE_SIZE, _open_regular, read_bundle

    bundle = read_bundle(path)
    with _open_regular(Path(path)) as f:
        f.seek(PREAMBLE_SIZE)
        header_text = f.read(min(bundle.payload_start - PREAMBLE_SIZE, MAX_HEADER)).decode("utf-8")
    config_text, config = "", None
    section = bundle.sections.get(CONFIG)
    if section is not None and section.size <= 64 * 1024 * 1024:
        config_text = bundle.read_section(CONFIG).decode("utf-8", errors="replace")
        try:
            parsed = json.loads(config_text)
        except (ValueError, RecursionError):  # a bundle's config nested deeper than the parser reads: none
            parsed = None
        config = parsed if isinstance(parsed, dict) else None
    return TrtmcView(bundle.header, header_text, {n: s.size for n, s in bundle.sections.items()}, config, config_text)


def _trtmc_layout(view: TrtmcView) -> bool:
    """Whether the bundle is laid out for one of TRTMC's encoder pipelines (its dispatch record or header names one)."""
    return view.dispatch("runtime_strategy") in ENCODER_STRATEGIES or view.header.get("runtime_strategy") in (
        ENCODER_STRATEGIES
    )


def trtmc_load_checks(path: str | os.PathLike[str]) -> dict[str, Any]:
    """What `bundle inspect` / `bundle verify` report of TRTMC's load, for any bundle: {summary, problems,
    not_checked}. Every bundle: no header field TRTMC reads may be shadowed by a nested one. A bundle laid out for a
    TRTMC encoder pipeline: every `load_problems` check, engine I/O contract included (`not_checked` when the bundle
    records no engine I/O: it is a note, not a failure, since TRTMC's own writer records none)."""
    from trtls.bundle.format import BundleError

    try:
        view = read_trtmc(path)
    except (BundleError, OSError, UnicodeDecodeError) as exc:
        return {
            "summary": "not read as TRTMC reads it",
            "problems": [f"cannot read it as TRTMC does: {exc}"],
            "not_checked": [],
        }
    if not _trtmc_layout(view):
        problems = [
            f"header {f['field']!r} is missing at the top level; TRTMC's reader would take it from {f['at']} = "
            f"{str(f['value'])[:60]!r}"
            for f in shadowed_fields(view.header)
        ]
        return {
            "summary": "not laid out for a TRTMC encoder pipeline: header fields checked as TRTMC's reader takes them",
            "problems": problems,
            "not_checked": [],
        }
    problems, not_checked = view.load_problems(), view.engine_io()[1]
    strategy = view.dispatch("runtime_strategy")
    summary = (
        f"{strategy}: TRTMC's loader would not run it ({len(problems)} problem(s))"
        if problems
        else f"{strategy}: dispatch record, sections, header fields"
        + ("" if not_checked else " and engine I/O")
        + " as TRTMC's loader reads them"
    )
    return {"summary": summary, "problems": problems, "not_checked": not_checked}
