"""`trtls import trtexec -- <trtexec arguments>`: the `[engines.NAME]` table equivalent to a trtexec command line.

Pure text in, text out: no TensorRT, no files read. Every argument is either mapped to a recipe key, or named
in a note (a TOML comment in the output) saying why it was skipped or how it was translated. The key table
(`core.build_config_keys.KEYS`) says which flags set which key; `importers.trtexec_flags.FLAGS` says what every
other trtexec 11.1 flag is — inference only (`--iterations`, `--warmUp` …), engine inspection (`--dumpLayerInfo`),
done by trtls its own way (`--verbose`), a build setting trtls refuses with the reason (`--inputIOFormats`,
`--markDebug`), or removed in TensorRT 11 with its replacement (`--fp16` becomes the AutoCast precision step unless
`legacy_precision` is asked for; `--layerPrecisions` NAME:fp32 becomes AutoCast's `exclude_nodes`) — and anything
else is named as not a trtexec 11.1 flag.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any

from trtls.core.build_config_keys import KEYS
from trtls.core.toml_text import toml_string
from trtls.importers.trtexec_flags import BY_FLAG, TrtexecFlag
from trtls.importers.trtexec_precision import REMOVED_HANDLERS, exclusions
from trtls.importers.trtexec_precision import precision_flags as set_precision
from trtls.importers.trtexec_values import (
    SWITCHES,
    ImportError_,
    parse_shapes,
    read_int,
    read_size,
    split_outside_quotes,
)

POOLS = {  # trtexec pool name → (recipe key, bytes per unit)
    "workspace": ("workspace_mib", 1 << 20),
    "dlaSRAM": ("dla_managed_sram_mib", 1 << 20),
    "dlaLocalDRAM": ("dla_local_dram_mib", 1 << 20),
    "dlaGlobalDRAM": ("dla_global_dram_mib", 1 << 20),
    "tacticSharedMem": ("tactic_shared_memory_kib", 1 << 10),
    "tacticDram": ("tactic_dram_mib", 1 << 20),
}
HARDWARE = {"none": "none", "ampere+": "ampere_plus", "samecomputecapability": "same_compute_capability"}
TILING = {"0": "none", "1": "fast", "2": "moderate", "3": "full"}
BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


@dataclass
class Imported:
    name: str
    engine: dict[str, Any] = field(default_factory=dict)  # onnx, output, timing_cache
    builder: dict[str, Any] = field(default_factory=dict)
    pools: dict[str, int] = field(default_factory=dict)
    precision: dict[str, Any] = field(default_factory=dict)
    plugins: dict[str, list[str]] = field(default_factory=dict)
    profiles: list[dict[str, dict[str, list[int]]]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def toml(self) -> str:
        return render(self)


def split_args(argv: list[str]) -> list[tuple[str, str | None]]:
    """`--flag=value`, `--flag value` (when the next token is not a flag) and `--flag` → (flag, value)."""
    out: list[tuple[str, str | None]] = []
    i = 0
    while i < len(argv):
        token = argv[i]
        if not token.startswith("-") or token in ("-", "--"):
            raise ImportError_(f"unexpected argument {token!r} (trtexec takes --flag or --flag=value)")
        body = token.lstrip("-")
        if "=" in body:
            flag, value = body.split("=", 1)
            out.append((flag, value))
        elif i + 1 < len(argv) and not argv[i + 1].startswith("--") and body not in SWITCHES:
            out.append((body, argv[i + 1]))
            i += 1
        else:
            out.append((body, None))
        i += 1
    return out


def import_trtexec(argv: list[str], name: str | None = None, legacy_precision: bool = False) -> Imported:
    if argv and re.split(r"[\\/]", argv[0])[-1].lower() in ("trtexec", "trtexec.exe"):
        argv = argv[1:]  # the command line pasted whole, program first (/usr/src/tensorrt/bin/trtexec --onnx=…)
    args = split_args(argv)
    flags = [f for f, _ in args]
    onnx = next((v for f, v in args if f == "onnx"), None)
    if not onnx:
        other = [f for f in flags if f in ("uff", "deploy", "model", "loadEngine")]
        why = f" (--{other[0]} is not an ONNX build)" if other else ""
        raise ImportError_(f"no --onnx=MODEL: trtls builds engines from ONNX models{why}")
    out = Imported(name or _engine_name(onnx))
    out.engine["onnx"] = onnx
    shape_sets = ShapeSets()
    precision_flags: list[str] = []
    for flag, value in args:
        handled = _map_one(out, flag, value, shape_sets, precision_flags)
        if handled:
            continue
        known = BY_FLAG.get(flag)
        if known is None:
            out.notes.append(f"--{flag}: not a trtexec 11.1 flag trtls knows; skipped")
        elif flag in REMOVED_HANDLERS:
            REMOVED_HANDLERS[flag](out, flag, value)
        else:
            out.notes.append(skip_note(known))
    if "output" not in out.engine:
        out.engine["output"] = f"build/{out.name}.engine"
        out.notes.append(f"no --saveEngine: output set to build/{out.name}.engine")
    set_precision(out, precision_flags, legacy_precision)
    exclusions(out)
    out.profiles = _profiles(out, shape_sets.lists())
    for index in (i for i in shape_sets.declared if i not in shape_sets.by_profile):
        out.notes.append(f"--profile={index}: no --minShapes/--optShapes/--maxShapes after it; no profile made for it")
    return out


def skip_note(known: TrtexecFlag) -> str:
    """The note for a flag no key takes: what it is, and why it is skipped (or what replaces it)."""
    what = {
        "inference": "inference only; skipped",
        "inspection": "skipped",
        "trtls": "skipped",
        "refused": "refused, not imported",
        "removed": "removed in TensorRT 11; skipped. Instead",
        "mapped": "skipped",
    }[known.disposition]
    return f"--{known.flag}: {what}: {known.note}" if known.note else f"--{known.flag}: {what}"


class ShapeSets:
    """The shapes of each profile as trtexec reads them: `--profile=N` makes the shapes after it profile N; without
    it, the k-th --minShapes (--optShapes, --maxShapes) is profile k (trtexec 11 refuses repeated shapes without
    --profile; trtls keeps reading them that way)."""

    def __init__(self) -> None:
        self.by_profile: dict[int, dict[str, list[dict[str, list[int]]]]] = {}
        self.current: int | None = None
        self.declared: list[int] = []  # every --profile=N, in order

    def add(self, which: str, shapes: dict[str, list[int]]) -> None:
        index = self.current if self.current is not None else len(self._column(which))
        profile = self.by_profile.setdefault(index, {"minShapes": [], "optShapes": [], "maxShapes": []})
        profile[which] = [shapes]

    def _column(self, which: str) -> list[int]:
        return [i for i, p in self.by_profile.items() if p[which]]

    def lists(self) -> dict[str, list[dict[str, list[int]]]]:
        """{minShapes: [profile 0's, profile 1's …], …} in profile order (a missing one is {})."""
        order = sorted(self.by_profile)
        return {k: [(self.by_profile[i][k] or [{}])[0] for i in order] for k in ("minShapes", "optShapes", "maxShapes")}


# trtexec flag → (recipe key, how to read its value), from the docs' key table: the importer has no list of its own.
FLAG_RULES: dict[str, tuple[str, str]] = {
    flag: (info.key, kind) for info in KEYS for flag, _, kind in (rule.partition(":") for rule in info.imports)
}
CHOICES = {  # trtexec's spellings of a choice → the recipe's
    "builder.tiling_level": TILING,
    "builder.hardware_compatibility_level": HARDWARE,
    "builder.runtime_platform": {"sameasbuild": "same_as_build", "windowsamd64": "windows_amd64"},
}
_SECTION = {"builder": "builder", "precision": "precision", "plugins": "plugins"}
_READS_NO_VALUE = {"true", "false", "precision", "strip_all"}  # a switch; every other kind reads the flag's value


def _map_one(out: Imported, flag: str, value: str | None, shapes: ShapeSets, precision_flags: list[str]) -> bool:
    rule = FLAG_RULES.get(flag)
    if rule is None:
        return False
    key, kind = rule
    if kind not in _READS_NO_VALUE and not kind.startswith("=") and not (value or "").strip():
        raise ImportError_(f"--{flag} needs a value (--{flag}=…): trtexec reads one, and the recipe would get none")
    if kind in _SPECIAL:
        _SPECIAL[kind](out, flag, value, shapes, precision_flags)
        return True
    _set(out, key, _read(flag, key, kind, value))
    return True


def _read(flag: str, key: str, kind: str, value: str | None) -> Any:
    if kind == "int":
        return read_int(flag, value)
    if kind in ("true", "false"):
        return kind == "true"
    if kind.startswith("="):
        return kind[1:]
    if kind == "lower":
        return (value or "").lower()
    if kind == "list":
        return [v.strip() for v in (value or "").split(",") if v.strip()]
    if kind == "paths":
        return split_outside_quotes(value or "")
    if kind == "choice":
        return CHOICES[key].get(str(value).lower(), value)
    return value  # text


def _set(out: Imported, key: str, value: Any) -> None:
    section, _, name = key.partition(".")
    if section not in _SECTION:  # onnx, output, timing_cache
        out.engine[key] = value
        return
    target: dict[str, Any] = getattr(out, _SECTION[section])
    if isinstance(value, list) and section == "plugins":
        target.setdefault(name, []).extend(value)
    else:
        target[name] = value


def _shapes(out: Imported, flag: str, value: str | None, shapes: ShapeSets, _: list[str]) -> None:
    if flag != "shapes":
        shapes.add(flag, parse_shapes(flag, value or ""))
        return
    fixed = parse_shapes(flag, value or "")  # --shapes
    for key in ("minShapes", "optShapes", "maxShapes"):
        shapes.add(key, fixed)
    out.notes.append("--shapes: one profile with min = opt = max = these shapes")


def _profile(out: Imported, flag: str, value: str | None, shapes: ShapeSets, _: list[str]) -> None:
    index = read_int(flag, value)
    if index < 0:
        raise ImportError_(f"--profile: expected a profile index 0, 1 …, got {value!r}")
    if index in shapes.by_profile or index in shapes.declared:
        raise ImportError_(f"--profile={index} given twice (trtexec: 'Optimization profile index cannot be the same')")
    shapes.current = index
    shapes.declared.append(index)


def _workspace(out: Imported, flag: str, value: str | None, *_: Any) -> None:  # the pre-8.4 spelling, in MiB
    out.pools["workspace_mib"] = read_size(flag, value or "", 1 << 20)[0]
    out.notes.append("--workspace: deprecated in trtexec; mapped to memory_pool_limits.workspace_mib")


def _strip_all(out: Imported, *_: Any) -> None:
    out.builder["strip_weights"] = True
    out.builder["refit"] = "all"


def _sparsity(out: Imported, flag: str, value: str | None, *_: Any) -> None:
    mode = (value or "").lower()
    if mode in ("enable", "force"):
        out.builder["sparse_weights"] = True
        if mode == "force":
            out.notes.append("--sparsity=force: mapped to sparse_weights = true; trtls does not prune weights")
    elif mode != "disable":
        raise ImportError_(f"--sparsity: expected disable, enable or force, got {value!r}")


_SPECIAL: dict[str, Any] = {  # the kinds a KeyInfo names that need more than one value read
    "shapes": _shapes,
    "profile": _profile,
    "pools": lambda out, flag, value, *_: _pools(out, value or ""),
    "workspace": _workspace,
    "precision": lambda out, flag, value, shapes, precision_flags: precision_flags.append(flag),
    "strip_all": _strip_all,
    "sparsity": _sparsity,
}


def _pools(out: Imported, value: str) -> None:
    for part in split_outside_quotes(value):
        pool, _, size = part.partition(":")
        if pool not in POOLS:
            raise ImportError_(f"--memPoolSize: unknown pool {pool!r} (known: {', '.join(POOLS)})")
        key, unit = POOLS[pool]
        amount, exact = read_size("memPoolSize", size, unit)
        out.pools[key] = amount
        if not exact:
            out.notes.append(f"--memPoolSize {pool}:{size}: rounded up to {amount} {'KiB' if unit == 1024 else 'MiB'}")


def _profiles(out: Imported, shapes: dict[str, list[dict[str, list[int]]]]) -> list[dict[str, dict[str, list[int]]]]:
    count = max((len(v) for v in shapes.values()), default=0)
    profiles = []
    for i in range(count):
        mins, opts, maxs = (shapes[k][i] if i < len(shapes[k]) else {} for k in ("minShapes", "optShapes", "maxShapes"))
        names = list(dict.fromkeys([*mins, *opts, *maxs]))
        profile: dict[str, dict[str, list[int]]] = {}
        for n in names:
            opt = opts.get(n) or maxs.get(n) or mins.get(n)
            entry = {"min": mins.get(n) or opt, "opt": opt, "max": maxs.get(n) or opt}
            missing = [k for k, src in (("min", mins), ("opt", opts), ("max", maxs)) if n not in src]
            if missing:
                out.notes.append(f"profile {i}, input {n}: no {'/'.join(missing)} shape given; used opt (or max)")
            profile[n] = entry  # type: ignore[assignment]
        profiles.append(profile)
    return profiles


def _engine_name(onnx: str) -> str:
    stem = PurePath(onnx).stem or "engine"
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", stem)
    return name if re.match(r"^[A-Za-z0-9_]", name) else f"e_{name}"


# ---------------------------------------------------------------- TOML text


def _key(name: str) -> str:
    return name if BARE_KEY.match(name) else toml_string(name)


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, list):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{_key(k)} = {_value(v)}" for k, v in value.items()) + " }"
    return toml_string(str(value))


def render(imp: Imported) -> str:
    table = f"engines.{_key(imp.name)}"
    lines = [f"# trtls import trtexec: {n}" for n in imp.notes]
    lines.append(f"[{table}]")
    lines.append(f"onnx = {_value(imp.engine['onnx'])}")
    lines.append(f"output = {_value(imp.engine['output'])}")
    if "timing_cache" in imp.engine:
        lines.append(f'timing_cache = {{ path = {_value(imp.engine["timing_cache"])}, mode = "read_write" }}')
    if imp.builder or imp.pools:
        lines += ["", f"[{table}.builder]"]
        lines += [f"{k} = {_value(v)}" for k, v in imp.builder.items()]
        if imp.pools:
            lines.append(f"memory_pool_limits = {_value(imp.pools)}")
    if imp.precision:
        lines += ["", f"[{table}.precision]"] + [f"{k} = {_value(v)}" for k, v in imp.precision.items()]
    if imp.plugins:
        lines += ["", f"[{table}.plugins]"] + [f"{k} = {_value(v)}" for k, v in imp.plugins.items()]
    for profile in imp.profiles:
        lines += ["", f"[[{table}.profiles]]"]
        lines += [f"inputs.{_key(n)} = {_value(s)}" for n, s in profile.items()]
    return "\n".join(lines) + "\n"
