"""The engine recipe (`trtls.toml`): typed models, and a loader whose every error has a location.

Loading never raises for bad input: it returns the findings (TRT1xx) with TOML paths that the
SourceMap turns into exact ranges, and `recipe` is None when any error was found, so no build
can start from a recipe that is wrong anywhere.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError

from trtls.core.build_config import BuilderSettings, PluginSettings, PrecisionSettings
from trtls.core.build_config_checks import build_config_checks
from trtls.core.evidence_table import EvidenceTable
from trtls.core.farm import ClusterTable, Matrix, RunOn
from trtls.core.farm_checks import farm_checks
from trtls.core.findings import Finding, Origin, Severity, TomlPath
from trtls.core.paths import MAX_NAME, is_safe_name, path_text_problems, place
from trtls.core.profiles import SHAPE_KEYS as SHAPE_KEYS  # onnx_files.profile_checks reads it here
from trtls.core.profiles import OptimizationProfile, profile_findings
from trtls.core.protocol import stable_json
from trtls.core.recipe_file import RecipeTooLarge, recipe_snapshot
from trtls.core.recipe_triage import TriageSettings
from trtls.core.store_table import StoreTable, store_path_findings
from trtls.core.toml_bounded import TomlSyntaxError, TomlTooDeep
from trtls.core.tomlpos import SourceMap, parse
from trtls.core.validation import RECIPE_TABLE, findings_from_validation
from trtls.core.vocabulary import BuilderPreference
from trtls.core.write_policy import write_policy_findings

ENGINE_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")


class _Model(BaseModel):
    model_config = RECIPE_TABLE


class TimingCache(_Model):
    path: str = Field(description="Timing cache file, relative to this recipe.")
    mode: Literal["off", "read", "read_write"] = Field(
        "read_write",
        description="off: never read or write; read: reuse a valid cache, never write; read_write: reuse and merge the "
        "new timings back after a successful build.",
    )


class EngineRecipe(_Model):
    onnx: str = Field(description="ONNX model to build, relative to this recipe.")
    output: str = Field(description="Engine file to write (atomically), relative to this recipe.")
    timing_cache: TimingCache | None = Field(None, description="Timing cache path and mode.")
    builder: BuilderSettings = Field(default_factory=BuilderSettings, description="Builder settings.")
    precision: PrecisionSettings = Field(
        default_factory=PrecisionSettings, description="Precision: AutoCast conversion, strong typing, legacy flags."
    )
    plugins: PluginSettings = Field(default_factory=PluginSettings, description="Plugin libraries and creators.")
    profiles: list[OptimizationProfile] = Field(
        default_factory=list,
        description="TensorRT optimization profiles; each gives min/opt/max for every dynamic input.",
    )
    cancel_grace_s: float = Field(
        10.0,
        gt=0,
        le=3600,
        description="Seconds a cooperative cancel may take before the worker is terminated (forced).",
    )
    keep_evidence: bool = Field(
        False, description="Move partial engines and suspect caches to .trtls/quarantine/ instead of deleting them."
    )
    builder_module: BuilderPreference = Field(
        "auto", description="Which TensorRT module the worker imports: auto tries tensorrt, then tensorrt_rtx."
    )
    worker: list[str] | None = Field(
        None,
        description="External worker command speaking trtls.events/1 (e.g. a C++ builder); default: the built-in "
        "worker.",
    )
    run_on: RunOn | None = Field(None, description="Where the build runs in the [cluster]: node labels, GPUs, memory.")
    matrix: Matrix | None = Field(None, description="Axes that expand this engine into cells (trtls build --matrix).")
    triage: TriageSettings = Field(default_factory=TriageSettings, description="What `trtls reduce` needs to know.")

    @property
    def builds_in_our_worker(self) -> bool:
        """The built-in worker builds it (no external `worker` command), so a worker started early for it may take its
        job: the one rule the application layer (its job sent ahead) and the supervisor (its worker adopted) share."""
        return not self.worker

    def job_profiles(self) -> list[dict[str, Any]]:
        """The profiles as the worker protocol carries them (and as buildConfigHash covers them)."""
        return [p.job() for p in self.profiles]


class RecipeFile(_Model):
    """The whole `trtls.toml`. Routes are validated by `core.route` with the same located-error rules."""

    version: Literal[1] = Field(1, description="Recipe format version.")
    cluster: ClusterTable | None = Field(None, description="A Ray cluster for remote and matrix builds (build farm).")
    store: StoreTable | None = Field(None, description="The engine store: where built engines are kept and reused.")
    evidence: EvidenceTable | None = Field(None, description="How much build evidence .trtls/ keeps (trtls gc).")
    engines: dict[str, EngineRecipe] = Field(default_factory=dict, description="One table per engine.")
    routes: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="Checkpoint → bundle routes (see route gates)."
    )
    allow_outside: list[str] = Field(
        default_factory=list,
        description="Files or folders outside this recipe's folder that trtls may write (an output, a cache, a "
        "bundle), relative to this recipe or absolute. Everything else the recipe writes must stay inside its folder "
        "(TRT117); every build's evidence lists the writes this allowed.",
    )


@dataclass
class LoadedRecipe:
    path: Path
    text: str
    source_map: SourceMap
    findings: list[Finding]
    recipe: RecipeFile | None  # None when any error was found
    data: dict[str, Any] = field(default_factory=dict)

    @property
    def base_dir(self) -> Path:
        return self.path.parent

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == Severity.error]

    def resolve(self, relative: str) -> Path:
        """Where `relative` points: its folders resolved, a final symlink NOT followed (`core.paths.place`), so a
        symlinked output is seen as the symlink it is (the write policy refuses it) and never as its target."""
        return place(self.base_dir, relative)

    def validated_file(self) -> RecipeFile | None:
        """The typed recipe even when a semantic check failed (e.g. a route build's engine ONNX not made yet);
        None when the document itself does not validate."""
        if self.recipe is not None:
            return self.recipe
        try:
            return RecipeFile.model_validate(self.data)
        except ValidationError:
            return None

    def engine(self, name: str) -> EngineRecipe:
        assert self.recipe is not None
        return self.recipe.engines[name]

    def location(self, finding: Finding) -> str:
        """`file:line:col` for a CLI message."""
        return f"{self.path}:{self.source_map.range(finding.path, finding.on_value).human()}"

    def in_file_order(self, findings: Iterable[Finding]) -> list[Finding]:
        """`findings` in the order they stand in the recipe (line, then column, where `location` places them), never
        in the order the models validated them: what a person reads top to bottom, and the order the terminal prints."""

        def place(finding: Finding) -> tuple[int, int]:
            rng = self.source_map.range(finding.path, finding.on_value)
            return rng.start_line, rng.start_col

        return sorted(findings, key=place)


def _finding(code: str, message: str, path: TomlPath, on_value: bool = False, **data: Any) -> Finding:
    return Finding(code, Severity.error, message, tuple(path), Origin.recipe, on_value, data)


def load_recipe(path: Path | str, text: str | None = None) -> LoadedRecipe:
    path = Path(path).resolve()
    if text is None:
        try:
            text = recipe_snapshot(path).raw.decode()  # a regular file, bounded (never a FIFO's block), read once
        except OSError as exc:
            f = _finding("TRT104", f"cannot read recipe: {exc.strerror}", ())
            return LoadedRecipe(path, "", SourceMap(), [f], None)
        except RecipeTooLarge as exc:
            f = _finding("TRT125", str(exc), ())
            return LoadedRecipe(path, "", SourceMap(), [f], None)
        except UnicodeDecodeError as exc:  # a model, an engine, an archive: anything but a TOML recipe
            f = _finding("TRT100", f"not a TOML recipe: the file is not UTF-8 text (byte {exc.start})", ())
            return LoadedRecipe(path, "", SourceMap(), [f], None)
    try:
        data, smap = parse(text)
    except TomlSyntaxError as exc:
        from trtls.core.tomlpos import Range, Span

        smap = SourceMap()
        smap.spans[("__syntax__",)] = Span(Range(exc.line, exc.col, exc.line, exc.col + 1))
        if isinstance(exc, TomlTooDeep):  # refused before anything recursive saw it; nothing else is checked
            f = _finding(exc.code, f"{exc.message}: nothing else is checked", ("__syntax__",))
        else:
            f = _finding("TRT100", f"TOML syntax error: {exc.message}", ("__syntax__",))
        return LoadedRecipe(path, text, smap, [f], None)

    unusable = [_finding("TRT102", why, where, True) for where, why in path_text_problems(data)]
    if unusable:  # nothing may stat such a path (ENAMETOOLONG is an exception, not "not found"): stop here
        return LoadedRecipe(path, text, smap, unusable, None)
    findings: list[Finding] = []
    recipe: RecipeFile | None = None
    try:
        recipe = RecipeFile.model_validate(data)
    except ValidationError as exc:
        findings.extend(findings_from_validation(exc, (), RecipeFile))
    loaded = LoadedRecipe(path, text, smap, findings, None, data)
    if recipe is not None:
        findings.extend(_semantic_checks(loaded, recipe))
        findings.extend(farm_checks(loaded, recipe))  # the farm tables: templates, axes, placement
        if recipe.routes:  # routes share the located-error rules; their models load only for a recipe with routes
            from trtls.core.route_checks import validate_routes  # (~13 ms of imports before a build's job, issue 31)

            findings.extend(validate_routes(loaded, recipe))
        findings.extend(write_policy_findings(loaded, recipe))  # where the recipe may write (one policy)
        findings.extend(store_path_findings(loaded, recipe))  # `[store] path`: a place a store may be (TRT339/340)
    if not any(f.severity == Severity.error for f in findings):
        loaded.recipe = recipe
    return loaded


def _semantic_checks(loaded: LoadedRecipe, recipe: RecipeFile) -> list[Finding]:
    """What a schema cannot say: names, files on disk, shapes (clashes between writes: `core.write_policy`)."""
    out: list[Finding] = []
    for name, eng in recipe.engines.items():
        base: TomlPath = ("engines", name)
        if not ENGINE_NAME.match(name) or not is_safe_name(name):  # it becomes build ids and evidence folders
            msg = f"engine name '{name}' must be letters, digits, '_', '-', '.' (at most {MAX_NAME} characters)"
            out.append(_finding("TRT108", msg, base))
        onnx = _placed(loaded, eng.onnx)
        if eng.worker is None and onnx is not None and not onnx.is_file():
            out.append(_finding("TRT104", f"ONNX file not found: {onnx}", base + ("onnx",), True, resolved=str(onnx)))
        for i, prof in enumerate(eng.profiles):
            out.extend(profile_findings(prof, base + ("profiles", i)))
        out.extend(build_config_checks(loaded.resolve, name, eng))
    return out


def _placed(loaded: LoadedRecipe, relative: str) -> Path | None:
    try:
        return loaded.resolve(relative)
    except ValueError:  # a NUL character: the write policy or TRT102 says so
        return None


SCHEMA_ID = "https://raw.githubusercontent.com/trtls/trtls/main/server/trtls/schema/trtls.schema.json"


def recipe_json_schema() -> dict[str, Any]:
    from trtls.core.route import RouteModel

    schema = RecipeFile.model_json_schema()
    # `routes` is typed `dict[str, Any]` so one bad route never hides the engines' findings; editors still get
    # the route model's keys, types and descriptions for completion.
    route_schema = RouteModel.model_json_schema(ref_template="#/$defs/{model}")
    schema.setdefault("$defs", {}).update(route_schema.pop("$defs", {}))
    schema["$defs"]["RouteModel"] = route_schema
    schema["properties"]["routes"]["additionalProperties"] = {"$ref": "#/$defs/RouteModel"}
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    # A stable address editors and TOML tools (Taplo, Tombi, Even Better TOML) can cache the schema under.
    schema["$id"] = SCHEMA_ID
    schema["title"] = "trtls.toml"
    return schema


def settings_digest(obj: Any) -> str:
    return hashlib.sha256(stable_json(obj).encode()).hexdigest()
