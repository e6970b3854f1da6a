"""The key table is the importer's only flag list (issue 18): every trtexec flag `trtls import trtexec` maps is
declared on the key it sets, shown in the docs' trtexec column, and imported onto exactly that key."""

from __future__ import annotations

import tomllib

import pytest

from trtls.core.build_config_keys import KEYS
from trtls.importers.trtexec import _SPECIAL, FLAG_RULES, import_trtexec

SIMPLE = {"int", "true", "false", "text", "lower", "list", "paths", "choice"}
SAMPLE = {"int": "3", "text": "x.bin", "lower": "DETAILED", "list": "-CUDNN", "paths": "a.so", "choice": "1"}


def test_every_rule_is_one_the_importer_knows() -> None:
    for info in KEYS:
        for rule in info.imports:
            flag, _, kind = rule.partition(":")
            assert kind in SIMPLE or kind.startswith("=") or kind in _SPECIAL, rule
            assert flag.lower() in info.trtexec.lower(), f"{flag} is imported onto {info.key} but not shown there"
    assert len(FLAG_RULES) == sum(len(i.imports) for i in KEYS), "a flag is declared on two keys"


@pytest.mark.parametrize("flag", sorted(f for f, (_, kind) in FLAG_RULES.items() if kind in SIMPLE - {"text"}))
def test_each_flag_lands_on_its_key(flag: str) -> None:
    key, kind = FLAG_RULES[flag]
    argv = ["--onnx=m.onnx", f"--{flag}" + (f"={SAMPLE[kind]}" if kind in SAMPLE else "")]
    table = tomllib.loads(import_trtexec(argv).toml())["engines"]["m"]
    section, _, name = key.partition(".")
    assert name in table[section], (flag, table)


def test_text_flags_land_on_the_engine_table() -> None:
    text = import_trtexec(["--onnx=m.onnx", "--saveEngine=out/m.plan", "--timingCacheFile=c.cache"]).toml()
    table = tomllib.loads(text)["engines"]["m"]
    assert table["output"] == "out/m.plan" and table["timing_cache"]["path"] == "c.cache"
