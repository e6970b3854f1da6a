"""Gate 4's reference adapter for a model with TensorRT Model Connect's BERT I/O (`route.trtmc_export`).

A `bundle_format = "trtmc"` route deploys a model that takes `input_ids` and `attention_mask` as int32 `[n]` (rank 1,
batch 1: what TRTMC's `encode_ids` feeds) and gives one float32 `hidden_states` `[n, hidden]`, while the reference
inputs and outputs are the checkpoint side's: int64 `[batch, sequence]` feeds, `last_hidden_state`
`[batch, sequence, hidden]` (the checkpoint's forward pass, or golden outputs recorded by running the original model).
Fed as they are, the runtime refuses every reference input for its dtype and rank, and gate 4 would reject the model
for the harness's mismatch. The adapter says exactly what is compared instead:

* inputs: each batch row of `input_ids` and `attention_mask` is one request, cast to int32 `[sequence]` (the row as it
  is, padding and mask included, so every position has a reference value); any other reference input is not fed
  (TRTMC feeds those two only) and is named in the evidence;
* outputs: the rows' `hidden_states`, stacked on a batch axis, are compared with the reference's `last_hidden_state`
  under the deployed name (`parity.tolerance:hidden_states`); a reference output the model has no counterpart for
  (a sentence-transformers `sentence_embedding`: TRTMC's `bert_encoder_only` pools nothing) is named as not compared.

The malformed-input and concurrency checks send the adapted first row (what the model takes), so a refusal they see
is the model's answer to the malformed value, not to a dtype or rank the harness got wrong.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from trtls.bundle.trtmc_contract import FED_INPUTS, OUTPUT_NAME
from trtls.runtimes import RunResult, RuntimeSpec, run_inputs

REFERENCE_OUTPUT = "last_hidden_state"  # the encoder output `route.trtmc_export` wraps (its ENCODER_OUTPUT)
INT32 = np.iinfo(np.int32)


@dataclass
class TrtmcFeed:
    """The adapter for one gate 4 run (see the module doc); `rows_per_feed` is filled by `run`."""

    rows_per_feed: list[int] = field(default_factory=list)
    not_fed: list[str] = field(default_factory=list)
    not_compared: list[str] = field(default_factory=list)

    def evidence(self) -> dict[str, Any]:
        """What was compared, for every check the adapter fed."""
        return {
            "adapter": "trtmc_bert",
            "inputs": (
                f"{', '.join(FED_INPUTS)}: each reference input's batch row as one request, int64 [batch, sequence] "
                "cast to int32 [sequence] (TRTMC feeds rank 1, batch 1)"
            ),
            "outputs": {
                OUTPUT_NAME: f"the rows' {OUTPUT_NAME} stacked on a batch axis vs the reference's {REFERENCE_OUTPUT}"
            },
            "requests_per_input": list(self.rows_per_feed),
            "not_fed": list(self.not_fed),
            "not_compared": list(self.not_compared),
        }

    def feed_problems(self, feeds: Sequence[Mapping[str, np.ndarray]]) -> list[str]:
        """Why a reference input cannot be fed to the model row by row (empty when every one can)."""
        problems = []
        for i, feed in enumerate(feeds):
            arrays = {k: np.asarray(v) for k, v in feed.items()}
            for name in FED_INPUTS:
                a = arrays.get(name)
                if a is None:
                    problems.append(f"input {i} has no {name!r} (the model takes {', '.join(FED_INPUTS)})")
                elif a.ndim != 2 or a.dtype.kind not in "iu":
                    problems.append(
                        f"input {i}'s {name!r} is {a.dtype} {list(a.shape)}: the adapter takes integer "
                        "[batch, sequence]"
                    )
                elif a.size and (int(a.min()) < INT32.min or int(a.max()) > INT32.max):
                    problems.append(f"input {i}'s {name!r} has values outside int32: they cannot be fed as int32")
            shapes = {arrays[n].shape for n in FED_INPUTS if n in arrays}
            if len(shapes) > 1:
                problems.append(f"input {i}'s {' and '.join(FED_INPUTS)} differ in shape ({sorted(shapes)})")
            for name in sorted(set(arrays) - set(FED_INPUTS)):
                if name not in self.not_fed:
                    self.not_fed.append(name)
        return problems

    def rows(self, feed: Mapping[str, np.ndarray]) -> list[dict[str, np.ndarray]]:
        """One request per batch row: each fed input's row as int32 [sequence]."""
        ids = np.asarray(feed[FED_INPUTS[0]])
        return [{n: np.asarray(feed[n])[r].astype(np.int32) for n in FED_INPUTS} for r in range(ids.shape[0])]

    def run(
        self, spec: RuntimeSpec, feeds: Sequence[Mapping[str, np.ndarray]]
    ) -> tuple[RunResult, RunResult, list[dict[str, np.ndarray]]]:
        """(the outputs per reference input, `hidden_states` stacked over its rows; the raw run of every row; the
        row feeds). One runtime call for all rows."""
        per_feed = [self.rows(f) for f in feeds]
        self.rows_per_feed = [len(r) for r in per_feed]
        row_feeds = [row for rows in per_feed for row in rows]
        raw = run_inputs(spec, row_feeds)
        if not raw.ok:
            return raw, raw, row_feeds
        outputs: list[dict[str, np.ndarray]] = []
        at = 0
        for n in self.rows_per_feed:
            answered = raw.outputs[at : at + n]
            at += n
            states = [o.get(OUTPUT_NAME) for o in answered]
            if any(s is None for s in states):
                names = sorted({k for o in answered for k in o})
                outputs.append({k: answered[0][k] for k in names})  # the signature check names what is missing
                continue
            try:
                outputs.append({OUTPUT_NAME: np.stack([np.asarray(s) for s in states])})
            except ValueError as exc:
                return RunResult("error", f"{OUTPUT_NAME} rows of one input differ in shape: {exc}"), raw, row_feeds
        mapped = RunResult("ok", outputs=outputs, wall_s=raw.wall_s)
        return mapped, raw, row_feeds

    def reference(self, result: RunResult) -> RunResult:
        """The reference's `last_hidden_state` under the deployed name; other outputs named as not compared."""
        if not result.ok:
            return result
        outputs = []
        for out in result.outputs:
            if REFERENCE_OUTPUT not in out:
                return RunResult(
                    "unavailable",
                    f"the reference has no {REFERENCE_OUTPUT} (it has {', '.join(sorted(out)) or 'none'}) to compare "
                    f"with the model's {OUTPUT_NAME}",
                )
            outputs.append({OUTPUT_NAME: out[REFERENCE_OUTPUT]})
            for name in sorted(set(out) - {REFERENCE_OUTPUT}):
                if name not in self.not_compared:
                    self.not_compared.append(name)
        return RunResult("ok", outputs=outputs, wall_s=result.wall_s)


def trtmc_feed(io_map: Any) -> TrtmcFeed | None:
    """The adapter when the deployed model's recorded I/O (a bundle header's `io_map`) is TRTMC's BERT I/O: int32
    rank-1 `input_ids` and `attention_mask`, a `hidden_states` output; None for any other model (fed as it is)."""
    if not isinstance(io_map, Mapping):
        return None
    inputs, outputs = io_map.get("inputs"), io_map.get("outputs")
    if not isinstance(inputs, Mapping) or not isinstance(outputs, Mapping) or OUTPUT_NAME not in outputs:
        return None
    for name in FED_INPUTS:
        entry = inputs.get(name)
        if not isinstance(entry, Mapping) or entry.get("dtype") != "int32":
            return None
        shape = entry.get("shape")
        if not isinstance(shape, list) or len(shape) != 1:
            return None
    return TrtmcFeed()


def adapted_files(
    adapter: TrtmcFeed, files: Mapping[str, Any], folder: Any, within: Any, *, every_row: bool
) -> tuple[dict[str, list[Any]], list[str]]:
    """Gate 5's inputs for a model with TRTMC's I/O: each `.npz` in `files` (name → path or None) written into
    `folder` as int32 [sequence] requests — its first row only (one request per input set: the set's sequence length,
    batch 1, as TRTMC serves it) or, with `every_row`, one file per row (the canary). Returns name → request files and
    why an input could not be adapted (that input then gets no file)."""
    from pathlib import Path

    from trtls.fs import ensure_folder
    from trtls.runtimes import load_npz, save_npz

    out: dict[str, list[Any]] = {}
    problems: list[str] = []
    ensure_folder(Path(folder), within=within)
    for index, (name, path) in enumerate(files.items()):
        if path is None:
            continue
        try:
            feed = load_npz(path)
        except (OSError, ValueError) as exc:
            problems.append(f"{name}: unreadable: {exc}")
            continue
        unfit = adapter.feed_problems([feed])
        if unfit:
            problems += [f"{name}: {p.removeprefix('input 0')}" for p in unfit]
            continue
        rows = adapter.rows(feed)
        out[name] = [
            save_npz(Path(folder) / f"{index}-{r}.npz", row, within=within)
            for r, row in enumerate(rows if every_row else rows[:1])
        ]
    return out, problems
