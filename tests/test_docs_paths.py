"""Every repository path a page names in backticks exists (issue 28 item 11: docs/architecture.md named the old
`models` package in 5 places, and nothing noticed).

A backticked token is a repository path when it is a slash-separated path (two components or more) that ends in a
file type the repository holds, or that starts with a top-level entry of the repository or a package of
`server/trtls`. It is looked up where the docs name paths from: the repository root, `server/`, the package
(`builds/avoidance/lookup.py`), the extension (`src/client.ts`) and the page's own folder. Not repository paths, by
rule:
`.trtls/…` (the state folder a run writes in a user's workspace). Not repository paths, by name: `ALLOWED`, each
with its reason."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "server" / "trtls"
BASES = (ROOT, ROOT / "server", PACKAGE, ROOT / "extension")
TICKED = re.compile(r"`([^`\n]+)`")
PATH = re.compile(r"^[\w.\-]+(/[\w.\-]+)+/?$")
FILE_TYPES = re.compile(r"\.(py|md|ts|js|json|jsonl|toml|sh|yml|yaml|txt|onnx|cfg|html)$")
ALLOWED = {
    "1_Pooling/config.json": "a file inside a sentence-transformers checkpoint, not this repository's",
    "Machine/settings.json": "VS Code's remote machine settings file",
    "build/model.bundle.receipt.json": "an example output a route build writes in the user's workspace",
    "extension/e2e/artifacts/": "written by the e2e run (screenshots, logs), not committed",
    "samples/common/sampleOptions.cpp": "TensorRT's own repository (where trtexec's flags are declared)",
}


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def top_level() -> set[str]:
    return {p.name for p in ROOT.iterdir()} | {p.name for p in PACKAGE.iterdir() if p.is_dir()}


def repository_paths(text: str, top: set[str]) -> list[str]:
    """The backticked repository paths of a page (code blocks are examples, not references)."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)
    out = []
    for token in TICKED.findall(text):
        if not PATH.match(token) or token.startswith(".trtls/"):
            continue
        if FILE_TYPES.search(token) or token.split("/")[0] in top:
            out.append(token)
    return out


def spellings(token: str) -> list[str]:
    """The paths a token may name: itself, a module without `.py` (`builds/avoidance`), a module's attribute
    (`lsp/triage_command._fix_for` → `lsp/triage_command.py`)."""
    folder, _, name = token.rpartition("/")
    module = name.split(".", 1)[0]
    return [token, f"{token}.py", f"{folder}/{module}.py"]


def exists(token: str, md: Path) -> bool:
    return any((base / path).exists() for base in (*BASES, md.parent) for path in spellings(token))


def test_every_backticked_repository_path_exists() -> None:
    top, missing, named = top_level(), [], 0
    for md in pages():
        for token in repository_paths(md.read_text(encoding="utf-8"), top):
            named += 1
            if token not in ALLOWED and not exists(token, md):
                missing.append(f"{md.relative_to(ROOT)}: `{token}`")
    assert named > 200  # the rule finds the paths the pages name (not a filter that lets everything through)
    assert missing == []


def test_the_rule_finds_a_stale_path_and_leaves_examples_alone() -> None:
    text = (
        "see `models/assist.py`, `builds/avoidance/lookup.py`, `lsp/triage_command.fix_x`, `core/nothing_here.run`, "
        "`.trtls/runs/<id>/summary.json`, `a/b c`\n```\nx/y.py\n```"
    )
    found = repository_paths(text, top_level())
    assert found == [
        "models/assist.py",
        "builds/avoidance/lookup.py",
        "lsp/triage_command.fix_x",
        "core/nothing_here.run",
    ]
    assert [exists(token, ROOT / "docs" / "x.md") for token in found] == [False, True, True, False]


def test_every_allowed_path_is_still_named_and_still_not_here() -> None:
    """An allowance that no page uses any more, or a path that now exists, is removed."""
    named = {t for md in pages() for t in repository_paths(md.read_text(encoding="utf-8"), top_level())}
    assert sorted(set(ALLOWED) - named) == []
    assert [p for p in ALLOWED if exists(p, ROOT / "docs" / "x.md")] == []
