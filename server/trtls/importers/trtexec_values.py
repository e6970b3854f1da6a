"""Reading trtexec's values: which flags take none (SWITCHES), shapes, sizes, integers, comma lists with quoted
names — and the error that says which flag's value could not be read, or is missing (`trtls import trtexec` exits 2
with it)."""

from __future__ import annotations

import re

SWITCHES = {  # flags that take no value: the token after one is the next flag's, never its value
    "fp16",
    "bf16",
    "int8",
    "fp8",
    "int4",
    "fp4",
    "best",
    "stronglyTyped",
    "versionCompatible",
    "vc",
    "excludeLeanRuntime",
    "refit",
    "stripWeights",
    "stripAllWeights",
    "noTF32",
    "weightStreaming",
    "allowWeightStreaming",
    "allowGPUFallback",
    "verbose",
    "skipInference",
    "separateProfileRun",
    "dumpProfile",
    "dumpLayerInfo",
    "useCudaGraph",
    "noCudaGraph",
    "useSpinWait",
    "noSpinWait",
    "noDataTransfers",
    "includeDataTransfers",
    "exposeDMA",
    "useManagedMemory",
    "dumpOutput",
    "dumpRawBindingsToFile",
    "dumpRefit",
    "dumpOptimizationProfile",
    "timeDeserialize",
    "timeRefit",
    "help",
    "h",
    "noBuilderCache",
    "noCompilationCache",
    "errorOnTimingCacheMiss",
    "directIO",
    "preferPrecisionConstraints",
    "obeyPrecisionConstraints",
    "getPlanVersionOnly",
    "markUnfusedTensorsAsDebugTensors",
    "pluginInstanceNorm",
    "pi",
    "uint8AsymmetricQuantizationDLA",
    "reportCapabilityDLA",
    "adjustForDLA",
    "enablePluginOverride",
    "monitorMemory",
    "distributiveIndependence",
    "safe",
    "consistency",
    "dumpKernelText",
    "buildDLAStandalone",
    "cpuOnly",
    "asyncFileReader",
    "ignoreParsedPluginLibs",
    "saveAllDebugTensors",
    "threads",
    "dryRun",
    "continue",
    "saveAllEngines",
    "weightless",
    "restricted",
}

UNITS = {"B": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


MAX_DIM = 2**63 - 1  # TensorRT's dimensions are int64


class ImportError_(ValueError):
    """The command line cannot become a recipe (no --onnx, a malformed shape…): exit 2 with this message."""


def parse_shapes(flag: str, value: str) -> dict[str, list[int]]:
    """`input_ids:1x128,'x:0':1x3x224x224` → {name: dims}."""
    shapes: dict[str, list[int]] = {}
    for part in split_outside_quotes(value):
        if ":" not in part:
            raise ImportError_(f"--{flag}: {part!r} is not NAME:DIMS (e.g. input:1x3x224x224)")
        name, dims = part.rsplit(":", 1)
        name = name.strip().strip("'\"")
        if not name:
            raise ImportError_(f"--{flag}: {part!r} names no input (NAME:DIMS, e.g. input:1x3x224x224)")
        try:
            shapes[name] = [int(d) for d in dims.lower().split("x")] if dims else []
        except ValueError:
            raise ImportError_(f"--{flag}: dimensions of {name!r} must be integers joined by x, got {dims!r}") from None
        if any(not 1 <= d <= MAX_DIM for d in shapes[name]):  # the recipe's rule (TRT105): never a table it refuses
            raise ImportError_(f"--{flag}: dimensions of {name!r} must each be from 1 to 2^63-1, got {dims!r}")
    return shapes


def split_outside_quotes(value: str) -> list[str]:
    parts, current, quote = [], "", None
    for ch in value:
        if ch in "'\"" and quote in (None, ch):
            quote = None if quote else ch
        if ch == "," and quote is None:
            parts.append(current)
            current = ""
        else:
            current += ch
    if current:
        parts.append(current)
    return [p for p in (s.strip() for s in parts) if p]


def read_size(flag: str, text: str, unit: int) -> tuple[int, bool]:
    """trtexec sizes: a number with an optional B/K/M/G suffix (default MiB) → (value in `unit`, exact)."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([BKMG]?)\s*", text, re.I)
    if m is None:
        raise ImportError_(f"--{flag}: {text!r} is not a size (e.g. 1024, 512M, 4G, 48K)")
    nbytes = float(m.group(1)) * UNITS[(m.group(2) or "M").upper()]
    value = max(1, -(-int(nbytes) // unit))
    return value, value * unit == nbytes


def read_int(flag: str, value: str | None) -> int:
    try:
        return int(str(value))
    except ValueError:
        raise ImportError_(f"--{flag}: expected an integer, got {value!r}") from None
