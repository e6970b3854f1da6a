"""Every diagnostic code trtls can produce, in one table: code → severity, title, documentation page and anchor.

Like ruff's `codes.rs`: a code exists only if it is registered here, and `tests/test_codes.py` checks that every
registered code has its section (`## TRTnnn`) on its page under `docs/codes/`, that every documented code is
registered, and that every code literal in the source is registered; each section's title and the pages' index are
generated from this table (`python -m trtls.schema.code_pages`), so a title cannot drift. Faces read the table (the
LSP's diagnostic `codeDescription`, SARIF `helpUri` and rule names, the CLI's `file:line:col: CODE`).

Adding a code: one `Code(...)` line in its area's block (the comments mark each area's free range), its
`## TRTnnn` section on that page (the explanation, starting with a `**title**`), then
`python -m trtls.schema.code_pages` (it writes the title and the index). Severity is the one a finding of the code
has; a gate check's is `ERROR` when it can reject the route and `WARNING` when it can only hold it
(`GateCheck.finding` maps each status).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path


class Severity(StrEnum):
    error = "error"
    warning = "warning"
    information = "information"
    hint = "hint"


ERROR, WARNING, INFO = Severity.error, Severity.warning, Severity.information


@dataclass(frozen=True)
class Code:
    code: str  # TRTnnn
    severity: Severity
    page: str  # docs/codes/<page>.md
    title: str

    @property
    def anchor(self) -> str:
        return self.code.lower()

    @property
    def doc_path(self) -> str:
        """The page and anchor, relative to the docs folder: `codes/recipe.md#trt101`."""
        return f"codes/{self.page}.md#{self.anchor}"


_TABLE: tuple[Code, ...] = (
    # -- docs/codes/recipe.md ------------------------------------------------------------------------------------------
    Code("TRT100", ERROR, "recipe", "TOML syntax error"),
    Code("TRT101", ERROR, "recipe", "Unknown key"),
    Code("TRT102", ERROR, "recipe", "Wrong type or value out of range"),
    Code("TRT103", ERROR, "recipe", "Missing required key"),
    Code("TRT104", ERROR, "recipe", "File not found"),
    Code("TRT105", ERROR, "recipe", "Bad optimization profile"),
    Code("TRT106", ERROR, "recipe", "Not one of the allowed values"),
    Code("TRT107", ERROR, "recipe", "Unknown engine"),
    Code("TRT108", ERROR, "recipe", "Bad engine name"),
    Code("TRT109", ERROR, "recipe", "Output clash"),
    Code("TRT116", WARNING, "recipe", "Waiver names no check"),
    Code("TRT117", ERROR, "recipe", "Write outside the recipe folder"),
    Code("TRT118", ERROR, "recipe", "Write through a symlink"),
    Code("TRT119", ERROR, "recipe", "Name cannot be a file name"),
    Code("TRT120", ERROR, "recipe", "Nesting too deep"),
    Code("TRT121", WARNING, "recipe", "allow_outside entry allows nothing"),
    Code("TRT122", WARNING, "recipe", "Route build would replace a file trtls did not write (its export or bundle)"),
    Code("TRT123", ERROR, "recipe", "Engine output would replace a file that is not an engine"),
    Code("TRT125", ERROR, "recipe", "Recipe too large to check"),
    # -- docs/codes/models.md ------------------------------------------------------------------------------------------
    Code("TRT110", ERROR, "models", "Not a valid ONNX model"),
    Code("TRT111", ERROR, "models", "External data file missing or short"),
    Code("TRT112", ERROR, "models", "The model has no input of that name"),
    Code("TRT113", ERROR, "models", "A dynamic input is missing from a profile"),
    Code("TRT114", ERROR, "models", "Rank differs from the model's"),
    Code("TRT115", ERROR, "models", "A static dimension changed"),
    Code("TRT130", ERROR, "models", "The ONNX parser does not support a node"),
    Code("TRT131", ERROR, "models", "The builder refuses the parsed network"),
    Code("TRT132", INFO, "models", "Capability not checked"),
    Code("TRT133", ERROR, "models", "A trial build fails before its first timing"),
    # TRT134–TRT139: free (one line per new code, here)
    # -- docs/codes/build-config.md ------------------------------------------------------------------------------------
    Code("TRT140", WARNING, "build-config", "Setting not applied by this builder module"),
    Code("TRT141", ERROR, "build-config", "Legacy precision flag not in this module"),
    Code("TRT142", ERROR, "build-config", "exclude_lean_runtime without version_compatible"),
    Code("TRT143", ERROR, "build-config", "Plugin library serialized but not loaded"),
    Code("TRT144", ERROR, "build-config", "Plugin library not found or not a regular file"),
    Code("TRT145", ERROR, "build-config", "Legacy precision flags on a strongly typed network"),
    Code("TRT146", ERROR, "build-config", "version_compatible needs the lean runtime"),
    Code("TRT147", ERROR, "build-config", "ModelOpt is not installed"),
    Code("TRT148", ERROR, "build-config", "Precision conversion failed"),
    Code("TRT149", ERROR, "build-config", "Plugin library or creator missing"),
    Code("TRT150", WARNING, "build-config", "l2_limit_for_tiling without tiling"),
    Code("TRT151", WARNING, "build-config", "Precision keys that do nothing together"),
    Code("TRT152", WARNING, "build-config", "Engine portability: a route target the engine will not load on"),
    Code("TRT153", INFO, "build-config", "Where the engine will load"),
    # TRT154–TRT169: free (one line per new code, here)
    # -- docs/codes/farm.md --------------------------------------------------------------------------------------------
    Code("TRT170", ERROR, "farm", "Bad matrix output template"),
    Code("TRT171", ERROR, "farm", "Two cells, one file"),
    Code("TRT172", ERROR, "farm", "Bad matrix value"),
    Code("TRT173", ERROR, "farm", "Precision variant's ONNX file not found"),
    Code("TRT174", ERROR, "farm", "Empty matrix or axis"),
    Code("TRT175", WARNING, "farm", "`run_on` without `[cluster]`"),
    Code("TRT176", ERROR, "farm", "Bad label placeholder"),
    Code("TRT177", ERROR, "farm", "Unknown matrix cell"),
    Code("TRT230", ERROR, "farm", "No node has the label"),
    Code("TRT231", ERROR, "farm", "Waited too long for a node"),
    Code("TRT232", ERROR, "farm", "Node lost"),
    Code("TRT233", ERROR, "farm", "The engine did not arrive intact"),
    Code("TRT234", ERROR, "farm", "Ray is not installed"),
    Code("TRT235", ERROR, "farm", "Cannot reach the Ray cluster"),
    Code("TRT236", ERROR, "farm", "No node is big enough"),
    Code("TRT237", ERROR, "farm", "A local farm cannot be secured"),
    # TRT178–TRT199: free (one line per new code, here)
    # TRT238–TRT259: free (one line per new code, here)
    # -- docs/codes/build.md -------------------------------------------------------------------------------------------
    Code("TRT201", WARNING, "build", "Build cancelled"),
    Code("TRT202", ERROR, "build", "Build failed"),
    Code("TRT203", ERROR, "build", "Forced stop"),
    Code("TRT204", ERROR, "build", "Worker killed"),
    Code("TRT205", INFO, "build", "Retry advice"),
    Code("TRT206", ERROR, "build", "TensorRT internal error"),
    Code("TRT207", ERROR, "build", "Out of memory during the build"),
    Code("TRT208", WARNING, "build", "Engine portability: the engine cannot run on this GPU"),
    # TRT209–TRT229: free (one line per new code, here)
    # -- docs/codes/timing-cache.md ------------------------------------------------------------------------------------
    Code("TRT301", WARNING, "timing-cache", "Timing cache quarantined"),
    Code("TRT302", INFO, "timing-cache", "Timing cache not applicable"),
    Code("TRT303", INFO, "timing-cache", "Timing cache discarded"),
    # TRT304–TRT329: free (one line per new code, here)
    # -- docs/codes/store.md -------------------------------------------------------------------------------------------
    Code("TRT330", ERROR, "store", "Store path is not a folder"),
    Code("TRT331", ERROR, "store", "Store folder not writable"),
    Code("TRT332", WARNING, "store", "Store entry corrupt: quarantined"),
    Code("TRT333", WARNING, "store", "Engine built but not stored"),
    Code("TRT334", WARNING, "store", "Store entry's key does not match its content"),
    Code("TRT335", INFO, "store", "Engine reused from the store"),
    Code("TRT336", INFO, "store", "Will rebuild"),
    Code("TRT337", INFO, "store", "Engine at output not described by the recipe"),
    Code("TRT338", ERROR, "store", "Nothing to roll back to"),
    Code("TRT339", ERROR, "store", "Store path is not a place for a store"),
    Code("TRT340", ERROR, "store", "Store writable by untrusted users"),
    Code("TRT341", ERROR, "store", "No such build or engine key"),
    Code("TRT342", WARNING, "store", "Damaged store entry left in place"),
    # TRT343–TRT349: the engine store's (one line per new code, here); TRT350–TRT399: free
    # -- docs/codes/cleanup.md -----------------------------------------------------------------------------------------
    Code("TRT401", INFO, "cleanup", "Cleanup done"),
    Code("TRT402", INFO, "cleanup", "Partial files quarantined"),
    Code("TRT403", ERROR, "cleanup", "Cleanup failed"),
    Code("TRT404", WARNING, "cleanup", "Interrupted: the supervising process died"),
    Code("TRT405", ERROR, "cleanup", "Output folder not writable"),
    Code("TRT410", ERROR, "cleanup", "Output busy: another build holds it"),
    Code("TRT411", ERROR, "cleanup", "Output lock cannot be used"),
    Code("TRT412", ERROR, "cleanup", "Output file cannot be replaced"),
    Code("TRT413", ERROR, "cleanup", "Evidence cannot be written"),
    # TRT406–TRT409, TRT414–TRT419: free (one line per new code, here)
    # -- docs/codes/command-line.md ------------------------------------------------------------------------------------
    Code("TRT420", ERROR, "command-line", "Command line not understood"),
    Code("TRT421", ERROR, "command-line", "A file could not be read or written"),
    # TRT422–TRT429: free (one line per new code, here)
    # -- docs/codes/gate-source.md -------------------------------------------------------------------------------------
    Code("TRT500", WARNING, "gate-source", "Gate 1 could not run"),
    Code("TRT501", WARNING, "gate-source", "Revision not pinned"),
    Code("TRT502", ERROR, "gate-source", "Checkpoint layout or identity"),
    Code("TRT503", ERROR, "gate-source", "Path escapes the checkpoint"),
    Code("TRT504", WARNING, "gate-source", "config.json missing or not a JSON object"),
    Code("TRT505", WARNING, "gate-source", "Model card missing or unparsable"),
    Code("TRT506", WARNING, "gate-source", "No licence declared"),
    Code("TRT507", ERROR, "gate-source", "Licence not allowed"),
    Code("TRT508", WARNING, "gate-source", "Remote code"),
    Code("TRT509", ERROR, "gate-source", "Pickle weights"),
    Code("TRT510", ERROR, "gate-source", "Weights"),
    Code("TRT511", WARNING, "gate-source", "Tokenizer / processor files missing or unparsable"),
    Code("TRT512", ERROR, "gate-source", "Checkpoint not locked, or differs from `trtls.lock.json`"),
    Code("TRT513", WARNING, "gate-source", "Revision not verified (a plain folder records no commit)"),
    Code("TRT514", ERROR, "gate-source", "Tokenizer does not fit the model"),
    # TRT515–TRT529: free (one line per new code, here)
    # -- docs/codes/gate-environment.md --------------------------------------------------------------------------------
    Code("TRT600", WARNING, "gate-environment", "Gate 2 could not run"),
    Code("TRT601", WARNING, "gate-environment", "Builder not found or other module"),
    Code("TRT602", WARNING, "gate-environment", "Builder version differs from the pin"),
    Code("TRT603", WARNING, "gate-environment", "Python version differs from the pin"),
    Code("TRT604", WARNING, "gate-environment", "CUDA runtime / driver differ from the pin or cannot be discovered"),
    Code("TRT605", WARNING, "gate-environment", "GPU name / compute capability differ from the pin or no GPU found"),
    Code("TRT606", ERROR, "gate-environment", "Engine recipe"),
    Code("TRT607", WARNING, "gate-environment", "No current successful build"),
    Code("TRT608", WARNING, "gate-environment", "ONNX Runtime version"),
    Code("TRT609", WARNING, "gate-environment", "Integration boundary (FFI) not named with an owner"),
    # TRT610–TRT619: free (one line per new code, here)
    # -- docs/codes/gate-bundle.md -------------------------------------------------------------------------------------
    Code("TRT700", WARNING, "gate-bundle", "Gate 3 could not run"),
    Code("TRT701", WARNING, "gate-bundle", "Bundle not found"),
    Code("TRT702", ERROR, "gate-bundle", "Container or header unsound"),
    Code("TRT703", ERROR, "gate-bundle", "Recorded digests do not match"),
    Code("TRT704", WARNING, "gate-bundle", "Foreign bundle without recorded digests"),
    Code("TRT705", WARNING, "gate-bundle", "Bundle is stale against the checkpoint"),
    Code("TRT706", WARNING, "gate-bundle", "Bundle is stale against the build"),
    Code("TRT707", WARNING, "gate-bundle", "Bundle sections are not the files gates 4–5 test"),
    Code("TRT708", WARNING, "gate-bundle", "SBOM missing or not describing this bundle"),
    Code("TRT709", WARNING, "gate-bundle", "The bundle path leaves the recipe folder"),
    Code("TRT710", WARNING, "gate-bundle", "Plugin library not described, or changed since the bundle"),
    Code("TRT711", ERROR, "gate-bundle", "A nested header key stands in for a missing top-level field"),
    Code("TRT712", ERROR, "gate-bundle", "Optimized runtime descriptor unsound or its artifact tree changed"),
    Code("TRT713", WARNING, "gate-bundle", "No usable build receipt beside a bundle trtls did not write"),
    Code("TRT714", ERROR, "gate-bundle", "The build receipt describes another bundle"),
    # TRT715–TRT719: free (one line per new code, here)
    # -- docs/codes/gate-parity.md -------------------------------------------------------------------------------------
    Code("TRT800", WARNING, "gate-parity", "Gate 4 could not run"),
    Code("TRT801", WARNING, "gate-parity", "Runtime unavailable"),
    Code("TRT802", ERROR, "gate-parity", "Run failed on the reference inputs"),
    Code("TRT803", ERROR, "gate-parity", "Output signature mismatch"),
    Code("TRT804", ERROR, "gate-parity", "NaN/Inf"),
    Code("TRT805", ERROR, "gate-parity", "Outside tolerance"),
    Code("TRT806", ERROR, "gate-parity", "Tokenizer output differs"),
    Code("TRT807", ERROR, "gate-parity", "Malformed input not refused cleanly"),
    Code("TRT808", ERROR, "gate-parity", "Concurrency differs from serial"),
    Code("TRT809", WARNING, "gate-parity", "Fault injection enabled"),
    Code("TRT810", WARNING, "gate-parity", "Gate 4 configuration invalid"),
    Code("TRT811", WARNING, "gate-parity", "The deployed artifact was not executed"),
    Code("TRT812", WARNING, "gate-parity", "Reference not independent of the export"),
    Code("TRT813", WARNING, "gate-parity", "Precision change without tolerances for that precision"),
    Code("TRT814", WARNING, "gate-parity", "Tokenizer limit and engine profile disagree on sequence length"),
    Code("TRT815", WARNING, "gate-parity", "An input of the checkpoint's model is dropped by the export"),
    Code("TRT816", WARNING, "gate-parity", "Deployed pooling does not match modules.json"),
    Code("TRT817", ERROR, "gate-parity", "Tokenizer differs from an independent implementation"),
    # TRT818–TRT829: free (one line per new code, here)
    # -- docs/codes/gate-release.md ------------------------------------------------------------------------------------
    Code("TRT900", WARNING, "gate-release", "Gate 5 could not run"),
    Code("TRT901", ERROR, "gate-release", "Latency"),
    Code("TRT902", ERROR, "gate-release", "Throughput"),
    Code("TRT903", ERROR, "gate-release", "Memory"),
    Code("TRT904", ERROR, "gate-release", "Warm-up cost"),
    Code("TRT905", ERROR, "gate-release", "Cold build time"),
    Code("TRT906", ERROR, "gate-release", "Baseline"),
    Code("TRT907", ERROR, "gate-release", "Canary"),
    Code("TRT908", ERROR, "gate-release", "Rollback"),
    Code("TRT909", ERROR, "gate-release", "Measurement could not run"),
    Code("TRT910", WARNING, "gate-release", "A path the route names leaves the recipe folder"),
    Code("TRT911", WARNING, "gate-release", "Portability: a target the engine was not built for or validated on"),
    Code("TRT912", WARNING, "gate-release", "The measured ONNX Runtime session is not the one the bundle records"),
    # TRT913–TRT929: free (one line per new code, here)
    # -- docs/codes/route-life.md --------------------------------------------------------------------------------------
    Code("TRT950", WARNING, "route-life", "Promoted route must be revalidated"),
    Code("TRT951", ERROR, "route-life", "The promoted bundle's canary failed"),
    Code("TRT952", ERROR, "route-life", "The promotion ledger is tampered"),
    Code("TRT953", ERROR, "route-life", "The route cannot be built as asked"),
    # TRT954–TRT979: free (one line per new code, here)
    # -- docs/codes/triage.md ------------------------------------------------------------------------------------------
    Code("TRT980", WARNING, "triage", "Reduced to a minimal failing model"),
    Code("TRT981", WARNING, "triage", "First layer out of tolerance"),
    Code("TRT982", ERROR, "triage", "A module the reduction needs is not installed"),
    Code("TRT983", ERROR, "triage", "The reduction failed"),
    # TRT984–TRT999: free (one line per new code, here)
)

CODES: dict[str, Code] = {c.code: c for c in _TABLE}
assert len(CODES) == len(_TABLE), "a code is registered twice"
PAGES: tuple[str, ...] = tuple(dict.fromkeys(c.page for c in _TABLE))


def lookup(code: str) -> Code:
    """The registered code (KeyError for a code that is not registered: register it above)."""
    return CODES[code]


def _docs_base() -> str:
    """Where code links point: the docs beside this checkout when present (editable installs, CI), else the
    published copy."""
    local = Path(__file__).resolve().parents[3] / "docs"
    if (local / "codes").is_dir():
        return local.as_uri()
    return "https://github.com/trtls/trtls/blob/main/docs"


DOCS_BASE = _docs_base()


def doc_url(code: str) -> str:
    """The code's section; an unregistered code (a bug the tests catch) links to the index of codes."""
    entry = CODES.get(code)
    return f"{DOCS_BASE}/{entry.doc_path}" if entry is not None else f"{DOCS_BASE}/codes/README.md"
