"""The server's input boundary for recipes: which `uri` it accepts, what it reads, and how much it checks.

A command's `uri` comes from the client, so it is hostile until proven otherwise:
- only an absolute `file:` URI (no relative `"trtls.toml"` resolved against the server's cwd, no NUL byte);
- only a recipe whose REAL path (every symlink followed) is inside the real path of one of the client's workspace
  folders, or one the client has open (didOpen) outside every workspace folder: the server reads and writes
  `.trtls/` nowhere else, so a URI cannot make it build, recover or write evidence in an arbitrary folder. A symlink
  inside the workspace (the recipe, or a folder on its way) that leads out of it is refused, open or not: the
  user opened a file of the workspace, not the folder it leads to (issue 27, item 14). A lone recipe opened with no
  folder, or a file opened outside the workspace by its own path, is accepted (`judge`, the one function every
  handler's uri goes through);
- only a regular file, checked before anything is read (a FIFO would block, `/dev/zero` never ends), opened
  non-blocking and read up to MAX_RECIPE_BYTES.

An open document's text comes from the client; above MAX_RECIPE_BYTES it is not parsed at all (TRT125 on its
first line). Nesting is bounded at the TOML boundary (TRT120, core/tomlpos.py); should any check still overflow the
stack, the result is that same located TRT120, never a RecursionError.
Refusals are `-32602` with one line of text (the codes' page: docs/codes/recipe.md).
"""

from __future__ import annotations

import os
from collections.abc import Container
from pathlib import Path
from urllib.parse import unquote, urlparse

from pygls.exceptions import JsonRpcInvalidParams

from trtls.core.findings import Finding, Origin, Severity
from trtls.core.recipe import LoadedRecipe
from trtls.core.recipe_file import MAX_RECIPE_BYTES, NotARegularFile, RecipeTooLarge, recipe_snapshot
from trtls.core.tomlpos import SourceMap

SYNC_CHECK_BYTES = 64 * 1024  # a hover or lens with no checked result yet may check this much on the spot


def recipe_path(uri: object) -> Path:
    """The recipe file a `uri` names, or InvalidParams saying why it is refused."""
    if not isinstance(uri, str) or "\x00" in uri:
        raise JsonRpcInvalidParams("uri: expected a file: URI of a trtls.toml")
    parsed = urlparse(uri)
    if parsed.scheme != "file":
        raise JsonRpcInvalidParams(
            f"uri {uri!r}: not an absolute file: URI (a relative path is never resolved against the server's "
            "working directory)"
        )
    if parsed.netloc not in ("", "localhost"):
        raise JsonRpcInvalidParams(f"uri {uri!r}: a file on another host ({parsed.netloc}) is not read")
    text = unquote(parsed.path)
    if "\x00" in text:
        raise JsonRpcInvalidParams(f"uri {uri!r}: the path holds a NUL byte (%00)")
    if not text.startswith("/"):
        raise JsonRpcInvalidParams(f"uri {uri!r}: not an absolute path")
    return Path(os.path.normpath(text))


def _inside(path: Path, folder: Path) -> bool:
    try:
        path.relative_to(folder)
        return True
    except ValueError:
        return False


def check_allowed(path: Path, is_open: bool, folders: list[Path]) -> None:
    """A recipe whose real path is inside a workspace folder's real path, or one the client has open outside every
    workspace folder (a lone file). A path inside a workspace folder by its text whose real path leads out (a
    symlinked recipe or folder) is refused, open or not."""
    real = Path(os.path.realpath(path))
    real_folders = [Path(os.path.realpath(f)) for f in folders]
    if any(_inside(real, f) for f in real_folders):
        return
    by_text = any(_inside(path, f) for f in (*folders, *real_folders))
    if by_text:
        raise JsonRpcInvalidParams(
            f"{path}: a symlink leads out of the workspace (its real path is {real}); trtls builds, recovers and "
            "writes evidence only inside the workspace folders"
        )
    if is_open:
        return
    where = ", ".join(str(f) for f in folders) or "none"
    raise JsonRpcInvalidParams(
        f"{path}: outside the workspace folders ({where}) and not open in the editor; open it first"
    )


def judge(uri: object, is_open: bool, folders: list[Path]) -> Path:
    """The recipe file `uri` names, judged: an absolute file: URI (`recipe_path`) whose real path the server may
    act in (`check_allowed`). InvalidParams with one line otherwise. Every handler's uri goes through this."""
    path = recipe_path(uri)
    check_allowed(path, is_open, folders)
    return path


def recipe_folders(roots: list[Path]) -> list[Path]:
    """The folders (a workspace folder and two levels below it) whose `.trtls/` the server recovers when it starts;
    one whose real `.trtls` leads out of its workspace folder (a symlinked folder or `.trtls`) is left out: its
    records would make the server signal processes and write evidence there (issue 27, item 14)."""
    out = []
    for root in roots:
        real_root = Path(os.path.realpath(root))
        for candidate in [root, *root.glob("*"), *root.glob("*/*")]:
            state = candidate / ".trtls"
            if _inside(Path(os.path.realpath(state)), real_root) and candidate.is_dir() and state.is_dir():
                out.append(candidate)
    return out


def shown_file(path_text: str, open_uris: Container[str], folders: list[Path]) -> Path:
    """The real path of a file trtls wrote under a `.trtls/` folder the server may act in, for
    `trtls.showDocument`; InvalidParams otherwise. Judged by the real path (`.trtls/../../etc/passwd` and a link
    inside `.trtls/` lead elsewhere), and the `.trtls` folder's recipe folder judged like every uri (issue 27, 20)."""
    refused = "only a file trtls wrote under a .trtls/ folder of the workspace can be shown this way"
    path = Path(path_text)
    if "\x00" in path_text or not path.is_absolute():
        raise JsonRpcInvalidParams(f"{path_text!r}: {refused}")
    real = Path(os.path.realpath(path))
    if ".trtls" not in real.parts[:-1] or not real.is_file():
        raise JsonRpcInvalidParams(f"{path}: {refused} (its real path is {real})")
    cut = len(real.parts) - 1 - real.parts[::-1].index(".trtls")
    recipe = Path(*real.parts[:cut]) / "trtls.toml"
    try:
        check_allowed(recipe, recipe.as_uri() in open_uris, folders)
    except JsonRpcInvalidParams:
        raise JsonRpcInvalidParams(f"{path}: {refused} (its real path is {real})") from None
    return real


def read_recipe_file(path: Path) -> str | Finding:
    """The text of a recipe as saved, read by the one reader of a recipe's saved version (core.recipe_file.
    recipe_snapshot, bounded, through the door): a finding (TRT104 missing/unreadable, TRT125 too large, TRT100 not
    UTF-8) otherwise; a FIFO or a device is refused before it is opened (InvalidParams)."""
    try:
        return recipe_snapshot(path).raw.decode("utf-8")
    except NotARegularFile as exc:
        raise JsonRpcInvalidParams(f"{path}: TRT104 {exc.strerror}") from None
    except RecipeTooLarge as exc:
        return too_large(exc.size)
    except UnicodeDecodeError as exc:
        return _finding("TRT100", f"not a TOML recipe: the file is not UTF-8 text (byte {exc.start})")
    except (OSError, ValueError) as exc:
        return _finding("TRT104", f"cannot read recipe: {getattr(exc, 'strerror', None) or exc}")


def too_large(size: int) -> Finding:
    return _finding("TRT125", str(RecipeTooLarge(size)))


def oversized(text: str) -> bool:
    return len(text) > MAX_RECIPE_BYTES or (len(text) > MAX_RECIPE_BYTES // 4 and len(text.encode()) > MAX_RECIPE_BYTES)


def check_text(path: Path, text: str | None) -> LoadedRecipe:
    """Check the recipe (`text`: an open document's; None: read from disk, bounded). Never raises for bad input:
    a refusal of the file itself (not regular) is InvalidParams, every other problem a located finding."""
    from trtls.onnx_files.profile_checks import check_recipe

    source = read_recipe_file(path) if text is None else text
    if isinstance(source, Finding):
        return failed(path, source)
    if oversized(source):
        return failed(path, too_large(len(source.encode())))
    try:
        return check_recipe(path, source)
    except RecursionError:
        return failed(
            path,
            _finding("TRT120", "recipe nested too deeply to check (tables or arrays inside each other hundreds deep)"),
        )


def check_saved(path: Path, open_text: str | None) -> tuple[LoadedRecipe, bool]:
    """The recipe as saved on disk, checked, and whether the editor holds it open with other text (unsaved changes;
    `open_text`: the open document's, None when it is not open). What a command writes that outlives the editor (a
    rollback's pin, the route lock) must describe the file the terminal and CI read: such a command acts on this.
    Read once (`read_recipe_file`: the snapshot every face reads a saved recipe by), so the text compared with the
    editor's is the text checked."""
    source = read_recipe_file(path)
    if isinstance(source, Finding):
        return failed(path, source), open_text is not None
    return check_text(path, source), open_text is not None and open_text != source


def unsaved_note(path: Path, used: str) -> str:
    """What a command that acted on the saved recipe says while the editor holds unsaved changes to it (`used`: what
    of the saved file it used): nothing typed is written or lost, and the user knows which text counted."""
    return (
        f"{path} has unsaved changes in the editor: {used} the saved file, not the open buffer (save, then run it "
        "again to use them)"
    )


def failed(path: Path, finding: Finding) -> LoadedRecipe:
    """A recipe that could not be parsed: its one finding on the first line, no tables (so no Build lens)."""
    return LoadedRecipe(Path(os.path.abspath(path)), "", SourceMap(), [finding], None)


def _finding(code: str, message: str) -> Finding:
    return Finding(code, Severity.error, message, (), Origin.recipe)
