"""The capability answer a build recorded, over its engine in the editor after the build: a title-only code lens in
the words of `trtls report` and `trtls check --capability` (core.capability.capability_summary). It reads the build's
evidence and never imports TensorRT; the as-you-type answer (lsp/capability_diagnostics.py) is the same module's
words on the capability child's answer."""

from __future__ import annotations

from pathlib import Path

from trtls.core.capability import capability_summary, recorded_capability


def capability_lens_title(recipe: Path, build_id: str) -> str | None:
    """`capability · <verdict>` of the build's `summary.json`; None when the evidence cannot be read or recorded no
    answer (a lens that says nothing was measured is not worth its line: the report says it)."""
    from trtls.core.summary_record import SUMMARY_NAME, SummaryProblem, read_summary
    from trtls.report.evidence import runs_dir

    if not build_id or Path(build_id).name != build_id:
        return None  # a build id is one folder name under .trtls/runs
    summary = read_summary(runs_dir(recipe) / build_id / SUMMARY_NAME)
    if isinstance(summary, SummaryProblem):
        return None
    answer = recorded_capability(summary)
    if answer.get("status") == "not_checked":
        return None
    return f"capability · {capability_summary(answer)}"
