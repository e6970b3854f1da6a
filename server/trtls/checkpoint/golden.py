"""Golden outputs: reference outputs recorded elsewhere (another framework, another machine), with their provenance.

The file is Polygraphy's `RunResults` JSON — what `polygraphy run --save-outputs` writes and `--load-outputs`
reads — loaded through Polygraphy itself (`RunResults.load`, which decodes arrays with `allow_pickle=False`), so
trtls adds no format of its own. The route says where the outputs came from:

    golden_outputs = { path = "golden/tiny.json", framework = "torch", framework_version = "2.5.1",
                       inputs_sha256 = "<sha256 of reference_inputs>" }

`inputs_sha256` ties the outputs to the inputs they were computed from: gate 4 compares only when it equals the
sha256 of the route's `reference_inputs` file (outputs of other inputs prove nothing). Iteration i of the first
runner is the output of reference feed i.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np


class GoldenError(Exception):
    pass


@dataclass
class GoldenOutputs:
    runner: str
    outputs: list[dict[str, np.ndarray]]


def quiet_polygraphy() -> None:
    """Polygraphy logs to stdout (each load/save and comparison, and a note about colours), which would land in
    `trtls gates --format json`: trtls reports the results itself, so only its critical messages stay."""
    from polygraphy.logger import G_LOGGER

    G_LOGGER.colors = False
    G_LOGGER.module_severity = G_LOGGER.CRITICAL


def load_golden(path: Path) -> GoldenOutputs:
    """The first runner's outputs from a Polygraphy RunResults JSON file."""
    try:
        from polygraphy.comparator import RunResults
    except ImportError as exc:  # pragma: no cover - polygraphy is in trtls[gates]
        raise GoldenError("golden outputs need polygraphy (pip install 'trtls[gates]')") from exc
    quiet_polygraphy()
    try:
        results = RunResults.load(str(path))
    except Exception as exc:  # polygraphy raises its own PolygraphyException on bad input
        raise GoldenError(f"{path.name} is not a Polygraphy RunResults file: {exc}") from None
    if not results.lst:
        raise GoldenError(f"{path.name} holds no runner results")
    runner, iterations = results.lst[0]
    return GoldenOutputs(str(runner), [{k: np.asarray(v) for k, v in it.items()} for it in iterations])


def save_golden(path: Path, runner: str, outputs: list[dict[str, np.ndarray]]) -> None:
    """Write outputs as Polygraphy RunResults JSON (what `polygraphy run --save-outputs` produces)."""
    from polygraphy.comparator import IterationResult, RunResults

    quiet_polygraphy()
    results = RunResults()
    results.append((runner, [IterationResult(dict(o), runner_name=runner) for o in outputs]))
    results.save(str(path))


# -- who recorded them: the recorder record beside the outputs ------------------------------------------------------
#
# `<outputs>.recorder.json`, written by what recorded the outputs, is the record gate 4 judges independence from
# (`parity.reference_independent`, TRT812), never the `framework` typed in the recipe:
#
#     {"format": "trtls.golden-recorder/1", "outputs_sha256": "<sha256 of the outputs file>",
#      "inputs_sha256": "<sha256 of the inputs>", "runner": {"name": "onnxruntime", "version": "1.20.1"},
#      "ran": {"kind": "onnx", "file": "model.onnx", "sha256": "<sha256 of the ONNX it ran>"}}
#
# `ran.kind` is `onnx` (an ONNX file: its sha256 says which) or `checkpoint` (the framework ran the checkpoint's own
# weights: `id`, `revision`).

RECORDER_FORMAT = "trtls.golden-recorder/1"
RECORDER_SUFFIX = ".recorder.json"
RECORDER_LIMIT = 1024 * 1024


def recorder_path(outputs: Path) -> Path:
    return outputs.with_name(outputs.name + RECORDER_SUFFIX)


def write_recorder(outputs: Path, runner: str, version: str, ran: dict[str, Any], inputs_sha256: str) -> Path:
    """Record who recorded `outputs` (written beside it, atomically, in its folder)."""
    from trtls.core.sha256 import sha256_file
    from trtls.fs import Kind, atomic_write_text

    record = {
        "format": RECORDER_FORMAT,
        "outputs_sha256": sha256_file(outputs),
        "inputs_sha256": inputs_sha256,
        "runner": {"name": runner, "version": version},
        "ran": ran,
    }
    path = recorder_path(outputs)
    atomic_write_text(path, json.dumps(record, indent=2) + "\n", kind=Kind.route_artefact, within=outputs.parent)
    return path


def read_recorder(outputs: Path, within: Path) -> dict[str, Any] | str:
    """The recorder record of `outputs`, checked against the outputs' bytes, or why there is none to judge from."""
    from trtls.core.sha256 import sha256_file
    from trtls.fs import TooLarge, parse_json, read_text

    path = recorder_path(outputs)
    try:
        record = parse_json(read_text(path, limit=RECORDER_LIMIT, follow=False))
    except FileNotFoundError:
        return f"no record of who recorded the golden outputs ({path.name} is not beside {outputs.name})"
    except (OSError, TooLarge, ValueError) as exc:
        return f"{path.name} cannot be read as a recorder record: {exc}"
    ran = record.get("ran") if isinstance(record, dict) else None
    runner = record.get("runner") if isinstance(record, dict) else None
    if (
        not isinstance(record, dict)
        or record.get("format") != RECORDER_FORMAT
        or not isinstance(ran, dict)
        or not isinstance(runner, dict)
    ):
        return f"{path.name} is not a {RECORDER_FORMAT} record (runner and ran are required)"
    try:
        actual = sha256_file(outputs)
    except OSError as exc:
        return f"{outputs.name}: {exc.strerror or exc}"
    if record.get("outputs_sha256") != actual:
        recorded = str(record.get("outputs_sha256"))[:12]
        return f"{path.name} describes other outputs (sha256 {recorded}…, not {actual[:12]}…)"
    return record


def record_golden_onnx(model: Path, feed: dict[str, np.ndarray], inputs_sha256: str, outputs: Path) -> Path:
    """Record golden outputs by running `model` on ONNX Runtime (CPU) for `feed` (the inputs whose file has sha256
    `inputs_sha256`), with the recorder record saying so — what a model that ships as an ONNX export brings.
    Outputs recorded this way from the ONNX a route deploys are not independent of it (gate 4 holds TRT812)."""
    import onnxruntime as ort

    from trtls.core.sha256 import sha256_file
    from trtls.fs.models import require_regular

    require_regular(model)  # ONNX Runtime opens the path itself (external data beside it)
    session = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    values = session.run(names, feed)
    save_golden(outputs, "onnxruntime", [dict(zip(names, (np.asarray(v) for v in values), strict=True))])
    ran = {"kind": "onnx", "file": model.name, "sha256": sha256_file(model)}
    return write_recorder(outputs, "onnxruntime", str(ort.__version__), ran, inputs_sha256)
