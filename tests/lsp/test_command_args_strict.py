"""A command's argument is the client's JSON, taken as it is typed (trtls.lsp.command_args: strict): `true` is not one
trial, "yes" is not a flag, "1" is not a gate, 2.0 is not a count. Each was accepted before (pydantic's lax mode
coerced it), so a client's bug or a hostile argument started work the user never asked for."""

from __future__ import annotations

import pytest
from pygls.exceptions import JsonRpcInvalidParams

from trtls.lsp.command_args import FindDivergenceArgs, ReduceEngineArgs, RunGatesArgs, parse_args

URI = "file:///tmp/ws/trtls.toml"


@pytest.mark.parametrize(
    ("model", "raw", "field"),
    [
        (ReduceEngineArgs, {"uri": URI, "engine": "demo", "maxTrials": True}, "maxTrials"),
        (ReduceEngineArgs, {"uri": URI, "engine": "demo", "maxTrials": 4.0}, "maxTrials"),
        (ReduceEngineArgs, {"uri": URI, "engine": "demo", "maxTrials": "4"}, "maxTrials"),
        (ReduceEngineArgs, {"uri": URI, "engine": "demo", "resume": "yes"}, "resume"),
        (FindDivergenceArgs, {"uri": URI, "engine": "demo", "fix": 1}, "fix"),
        (RunGatesArgs, {"uri": URI, "route": "r", "gates": ["1"]}, "gates.0"),
    ],
)
def test_an_argument_of_another_type_is_invalid_params_naming_the_field(model, raw, field) -> None:
    with pytest.raises(JsonRpcInvalidParams) as refused:
        parse_args(model, raw)
    assert f"{field}: " in str(refused.value)


def test_the_arguments_a_client_sends_are_still_taken() -> None:
    args = parse_args(ReduceEngineArgs, {"uri": URI, "engine": "demo", "maxTrials": 4, "resume": True})
    assert args.maxTrials == 4 and args.resume is True
    assert parse_args(RunGatesArgs, {"uri": URI, "route": "r", "gates": [1, 4]}).gates == [1, 4]
