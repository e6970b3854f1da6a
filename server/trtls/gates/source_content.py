"""Gate 1's checks of what the checkpoint's files say, read as data: config, model card and licence, remote code,
pickle, safetensors headers, tokenizer (docs/codes/gate-source.md). `SourceChecks` collects the gate-1 checks of
one route."""

from __future__ import annotations

import json
from typing import Any

from trtls.checkpoint.content import (
    MAX_JSON,
    PROCESSOR_FILES,
    TOKENIZER_FILES,
    card_licence,
    load_json,
    read_model_card,
)
from trtls.checkpoint.layout import CheckpointFile
from trtls.checkpoint.sniff import find_pickle, safetensors_problems
from trtls.core.gate_result import GateCheck
from trtls.core.route import RouteModel


class SourceChecks:
    """The gate-1 checks of one route, in the order they are made; every path is under `routes.<name>`."""

    def __init__(self, route_name: str) -> None:
        self.route_name = route_name
        self.items: list[GateCheck] = []

    def add(
        self, name: str, status: str, message: str, code: str, keys: tuple, on_value: bool = True, **evidence: Any
    ) -> None:
        path = ("routes", self.route_name) + keys
        self.items.append(GateCheck(1, name, status, message, code, path, on_value, evidence))  # type: ignore[arg-type]


PATH = ("checkpoint", "path")


def check_config(checks: SourceChecks, by_rel: dict[str, CheckpointFile]) -> Any:
    """config.json parsed as a JSON object (returned), or None with a hold."""
    if "config.json" not in by_rel:
        checks.add("config", "hold", "config.json is missing", "TRT504", PATH)
        return None
    try:
        config = load_json(by_rel["config.json"].real)
    except (OSError, ValueError) as exc:
        checks.add("config", "hold", f"config.json does not parse: {exc}", "TRT504", PATH)
        return None
    if not isinstance(config, dict):
        checks.add("config", "hold", "config.json is not a JSON object", "TRT504", PATH)
        return None
    model_type = config.get("model_type")
    checks.add("config", "pass", f"config.json: model_type {model_type!r}", "TRT504", PATH, model_type=model_type)
    return config


def _card_licence(checks: SourceChecks, by_rel: dict[str, CheckpointFile]) -> str | None:
    """The licence the model card declares (its `license:` front matter), checking the card parses."""
    card_rel = next((r for r in ("README.md", "readme.md", "README.MD") if r in by_rel), None)
    if card_rel is None:
        checks.add("model_card", "hold", "no model card (README.md)", "TRT505", PATH)
        return None
    try:
        data = read_model_card(by_rel[card_rel].real)
    except Exception as exc:
        checks.add("model_card", "hold", f"model card does not parse: {exc}", "TRT505", PATH)
        return None
    checks.add(
        "model_card",
        "pass",
        f"model card {card_rel} parsed ({len(data)} metadata keys)",
        "TRT505",
        PATH,
        metadata_keys=sorted(data),
    )
    return card_licence(data)


def check_card_and_licence(checks: SourceChecks, by_rel: dict[str, CheckpointFile], route: RouteModel) -> str | None:
    licence = _card_licence(checks, by_rel)
    allowed = [a.lower() for a in route.allowed_licenses]
    key = ("allowed_licenses",)
    if licence is None:
        checks.add(
            "license",
            "hold",
            "the model card declares no licence (`license:` in its front matter)",
            "TRT506",
            key,
            allowed=route.allowed_licenses,
        )
    elif licence.lower() in allowed:
        checks.add(
            "license", "pass", f"licence {licence} is allowed for: {route.intended_use}", "TRT507", key, license=licence
        )
    else:
        checks.add(
            "license",
            "reject",
            f"licence '{licence}' is not in allowed_licenses {route.allowed_licenses}",
            "TRT507",
            key,
            license=licence,
            allowed=route.allowed_licenses,
        )
    return licence


def _remote_code_keys(obj: Any, where: str = "", depth: int = 0) -> list[str]:
    """Every `auto_map` and every `trust_remote_code` that is not plainly false, at any depth of a config (a
    multimodal model's `text_config.auto_map` loads code as the top one does; `"trust_remote_code": 1` or `"yes"` is
    as much a request as `true`): each one said with its place."""
    found: list[str] = []
    if depth > 32:  # a config nests a few levels; deeper is not one any loader reads
        return found
    items = obj.items() if isinstance(obj, dict) else enumerate(obj) if isinstance(obj, list) else ()
    for key, value in items:
        place = f"{where}.{key}" if where else str(key)
        if key == "auto_map" and isinstance(obj, dict):
            names = ", ".join(sorted(map(str, value))) if isinstance(value, dict) else str(value)
            found.append(f"{place}: {names}")
        elif key == "trust_remote_code" and isinstance(obj, dict) and value not in (False, None):
            found.append(f"{place} = {json.dumps(value, default=str)[:80]}")
        else:
            found += _remote_code_keys(value, place, depth + 1)
    return found


def check_remote_code(checks: SourceChecks, by_rel: dict[str, CheckpointFile], config: Any) -> None:
    remote: list[str] = sorted(r for r in by_rel if r.endswith(".py"))
    for rel, f in by_rel.items():
        if not (
            rel.endswith(".json") and f.size <= MAX_JSON and (rel == "config.json" or rel.endswith("_config.json"))
        ):
            continue
        try:
            obj = config if rel == "config.json" else load_json(f.real)
        except (OSError, ValueError):
            continue
        remote += [f"{rel} ({said})" for said in _remote_code_keys(obj)]
    if remote:
        checks.add(
            "remote_code",
            "hold",
            "remote code needs review (never imported or run): " + "; ".join(remote),
            "TRT508",
            PATH,
            files=remote,
        )
    else:
        checks.add("remote_code", "pass", "no remote code (no *.py, no auto_map, no trust_remote_code)", "TRT508", PATH)


def check_pickle(checks: SourceChecks, by_rel: dict[str, CheckpointFile], allow_pickle: bool) -> None:
    """TRT509: every file's bytes, whatever its name (`checkpoint.sniff.find_pickle`); nothing is unpickled."""
    found: dict[str, str] = {}
    for rel, f in by_rel.items():
        try:
            hit = find_pickle(f.real)
        except OSError as exc:
            found[rel] = f"unreadable ({exc.strerror or exc}): cannot be shown free of pickle"
            continue
        if hit is not None:
            found[rel] = str(hit)
    pickles = sorted(found)
    described = "; ".join(f"{r}: {found[r]}" for r in pickles)
    key = ("allow_pickle",)
    if pickles and not allow_pickle:
        checks.add(
            "pickle",
            "reject",
            "pickle found by content (can run code when loaded; never unpickled here): " + described,
            "TRT509",
            key,
            False,
            files=pickles,
            found=found,
        )
    elif pickles:
        checks.add(
            "pickle",
            "pass",
            "pickle allowed by allow_pickle = true (not unpickled here): " + described,
            "TRT509",
            key,
            files=pickles,
        )
    else:
        checks.add(
            "pickle",
            "pass",
            f"no pickle in any of the {len(by_rel)} files (magic bytes, zip members, compressed streams)",
            "TRT509",
            key,
        )


def check_safetensors(checks: SourceChecks, by_rel: dict[str, CheckpointFile], weights: list[str]) -> bool:
    """Reject safetensors headers that do not describe their bytes (`checkpoint.sniff.safetensors_problems`: dtype,
    shape × dtype = span, bounds, overlaps, gaps), hold on no weights; True when something was malformed."""
    bad = [(r, p) for r in weights if r.endswith(".safetensors") for p in safetensors_problems(by_rel[r].real)]
    if bad:
        checks.add(
            "weights",
            "reject",
            "safetensors headers that do not describe their bytes: " + "; ".join(p for _, p in bad),
            "TRT510",
            PATH,
            files=sorted({r for r, _ in bad}),
            problems=[p for _, p in bad],
        )
    elif not weights:
        checks.add("weights", "hold", "no weight files found", "TRT510", PATH)
    return bool(bad)


def check_tokenizer(checks: SourceChecks, by_rel: dict[str, CheckpointFile]) -> None:
    tok = sorted(r for r in by_rel if r.rsplit("/", 1)[-1] in TOKENIZER_FILES + PROCESSOR_FILES)
    broken = []
    for r in tok:
        if r.endswith(".json"):
            try:
                load_json(by_rel[r].real)
            except (OSError, ValueError) as exc:
                broken.append(f"{r}: {exc}")
    if not tok:
        checks.add(
            "tokenizer",
            "hold",
            "no tokenizer or processor files (tokenizer.json, tokenizer_config.json, preprocessor_config.json, …)",
            "TRT511",
            PATH,
        )
    elif broken:
        checks.add("tokenizer", "hold", "tokenizer/processor files do not parse: " + "; ".join(broken), "TRT511", PATH)
    else:
        checks.add("tokenizer", "pass", "tokenizer/processor files: " + ", ".join(tok), "TRT511", PATH, files=tok)
