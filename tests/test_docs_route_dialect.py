"""Every route command in the README, docs/ and samples/ is written in the one dialect (cli/route_dialect.py):
`trtls route promote|status|canary|rollback [RECIPE] --route NAME` and `trtls report [RECIPE] --route NAME`, as
`trtls gates`, `route build` and `route lock` take it. The old `NAME --recipe R` still works (with a deprecation
note) but is never what a page teaches (issue 29: docs/gates.md's command block, samples/route/trtls.toml and
docs/pictures.md still wrote it)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIFECYCLE = r"(?:promote|status|canary|rollback)(?:\|(?:promote|status|canary|rollback))*"
COMMAND = re.compile(r"trtls\s+route\s+(" + LIFECYCLE + r")\b([^`\n]*)")
REPORT = re.compile(r"trtls\s+report\b([^`\n]*)")
STEPS = ("start", "pass", "fail", "start|pass|fail")


def _pages() -> list[Path]:
    samples = [p for p in sorted((ROOT / "samples").rglob("*")) if p.is_file() and p.suffix in (".md", ".toml", ".sh")]
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")), *samples]


def old_forms(text: str) -> list[str]:
    """The route commands in `text` written in the old dialect (a route name as the word, or --recipe)."""
    found = []
    for m in COMMAND.finditer(text):
        rest = m.group(2).split()
        if "--recipe" in rest:
            found.append(m.group(0).strip())
            continue
        word = next((w for w in rest if not w.startswith("-")), None)
        if word is None or "--route" in rest[: rest.index(word)]:
            continue  # no word, or the word is the --route option's value
        if word.startswith(("[", "…", "(", "#")) or "/" in word or word.endswith(".toml") or word in (".", "RECIPE"):
            continue  # the recipe, a placeholder for it, or the end of the command
        if m.group(1) == "canary" and word in STEPS:
            continue
        found.append(m.group(0).strip())
    for m in REPORT.finditer(text):
        rest = m.group(1).split()
        if "--route" in rest and "--recipe" in rest:
            found.append(m.group(0).strip())
    return found


def test_no_page_teaches_the_old_route_dialect() -> None:
    found = []
    for page in _pages():
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
            found += [f"{page.relative_to(ROOT)}:{number}: {form}" for form in old_forms(line)]
    assert found == []


def test_the_check_sees_each_old_form_and_passes_the_one_dialect() -> None:
    for old in (
        "trtls route promote|status|canary|rollback NAME …",
        "`trtls route promote tiny_ort` records this plan",
        "`trtls route canary tiny_ort start|pass|fail` follows it",
        "trtls route canary NAME fail --figure error_rate=0.5",
        "trtls route status tiny --recipe samples/route",
        "trtls report --route tiny --recipe samples/route",
    ):
        assert old_forms(old), old
    for new in (
        "trtls route promote [RECIPE] --route NAME [--approver WHO]",
        "trtls route status [RECIPE] [--route NAME] [--format text|json]",
        "trtls route canary samples/route --route tiny_ort start|pass|fail",
        "trtls route canary --route NAME fail --figure error_rate=0.5",
        "`trtls route status` says the same",
        "trtls route rollback --route NAME",
        "trtls report samples/route --route tiny",
        "trtls report latest --recipe samples/quickstart",
    ):
        assert old_forms(new) == [], new
