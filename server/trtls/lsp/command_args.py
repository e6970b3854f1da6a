"""Typed argument objects of the server's commands (one object per command), validated at the boundary."""

from __future__ import annotations

from typing import Literal, TypeVar

from lsprotocol import types as lsp
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pygls.exceptions import JsonRpcInvalidParams

from trtls.builds.supervisor.retry import RetryKind
from trtls.triage import MAX_TRIALS


class _Args(BaseModel):
    # strict: a client's JSON has its own types; `true` is not 1 trial, "yes" is not a flag, 2.0 is not a gate
    model_config = ConfigDict(extra="forbid", strict=True)


class BuildEngineArgs(_Args):
    uri: str
    engine: str
    retry: RetryKind | None = None  # builds.supervisor.retry owns the kinds


class BuildMatrixArgs(_Args):
    uri: str
    engine: str | None = None  # None: every engine of the recipe
    cell: str | None = None  # one cell by name
    matrix: bool = True  # False: each engine once (a farm run of the engines' own tables)


class BuildIdArgs(_Args):
    buildId: str


class CancelBuildArgs(_Args):
    buildId: str
    # an editor's Stop button (tree, title bar, lens) is an IDE stop; a script calling the command is `api`
    source: Literal["api", "ide_stop"] = "api"


class UriArgs(_Args):
    uri: str


class RunGatesArgs(_Args):
    uri: str
    route: str
    gates: list[int] | None = None


class LockRouteArgs(_Args):
    uri: str
    route: str


class AllowLicenseArgs(_Args):
    uri: str
    route: str
    license: str


class EmptyArgs(BaseModel):
    model_config = ConfigDict(extra="allow")


# -- triage (docs/triage.md) and rollback (docs/store.md)
class ReduceEngineArgs(_Args):
    uri: str
    engine: str
    maxTrials: int = Field(40, ge=1, le=MAX_TRIALS)  # trial builds before it stops, as `trtls reduce --max-trials`
    failRegex: list[str] | None = None  # a failure trtls does not classify, as `--fail-regex` (any pattern matches)
    resume: bool = False  # continue the engine's latest stopped reduction, as `--resume`


class FindDivergenceArgs(_Args):
    uri: str
    engine: str | None = None
    route: str | None = None
    fix: bool = False
    candidate: str | None = None  # a model's file: URI compared with the reference, as `--candidate` (no conversion)
    reference: str | None = None  # with candidate: the reference model's file: URI (default: the engine's ONNX)


class ShowDocumentArgs(_Args):
    path: str


class BuildMinimalArgs(_Args):
    uri: str
    reductionId: str
    engine: str


class RollbackEngineArgs(_Args):
    uri: str
    engine: str
    to: str | None = None  # a build id (trtls engines NAME); default: the newest good engine not at the output


Args = TypeVar("Args", bound=BaseModel)


def typed_args(name: str) -> type[BaseModel]:
    """The argument model of this name (as a handler's `args` annotation names it: lsp/server.py's `command`)."""
    model = globals().get(name)
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        raise TypeError(f"{name} is not an argument model of trtls.lsp.command_args")
    return model


def parse_args(model: type[Args], raw: lsp.LSPAny) -> Args:
    """One typed argument object per command; a wrong one is InvalidParams saying what was expected."""
    try:
        return model.model_validate(raw if raw is not None else {})
    except ValidationError as exc:
        fields = ", ".join(
            f"{k}: {getattr(v.annotation, '__name__', v.annotation)}" for k, v in model.model_fields.items()
        )
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'argument'}: {e['msg']}" for e in exc.errors())
        raise JsonRpcInvalidParams(f"expected one argument object {{{fields}}}; {problems}") from None
