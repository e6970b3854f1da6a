"""trtls.buildEngine refused a recipe with errors listing them in the order the models validated them, not the order
they stand in the file: `[engines.demo] cancel_grace_s = "ten"` (line 10) came after the `optimization_level = "3"`
of `[engines.demo.builder]` (line 13), because the engine model declares `builder` before `cancel_grace_s`. The
reply's `errors` are now in file order (`LoadedRecipe.in_file_order`, the order `trtls check` and a refused rollback
use), so a person reads them top to bottom. The real server over stdio, the quickstart's recipe."""

from __future__ import annotations

from pathlib import Path

from pytest_lsp import LanguageClient

from .lsp_helpers import execute, open_recipe


async def test_a_refused_build_lists_its_errors_in_file_order(client: LanguageClient, workspace: Path) -> None:
    recipe = workspace / "trtls.toml"
    text = recipe.read_text().replace("optimization_level = 3\n", 'optimization_level = "3"\n', 1)
    recipe.write_text(text.replace("cancel_grace_s = 10\n", 'cancel_grace_s = "ten"\n', 1))
    uri = open_recipe(client, workspace)

    reply = await execute(client, "trtls.buildEngine", {"uri": uri, "engine": "demo"})

    grace = "TRT102 'cancel_grace_s' must be a number, not the string 'ten'"
    level = "TRT102 'optimization_level' must be an integer, not the string '3' (write 3 without quotes)"
    assert reply["status"] == "invalid_recipe" and reply["errors"] == [
        f"{recipe}:10:18: {grace}",
        f"{recipe}:13:22: {level}",
    ]
    assert not (workspace / "build").exists() and not (workspace / ".trtls" / "runs").exists()
