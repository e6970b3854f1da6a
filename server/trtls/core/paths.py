"""Where a path really points, and the one sanitiser for names that become paths.

The recipe names every file trtls writes; `core.write_policy` decides which of those writes are allowed. This
module holds the primitives it and every writer share:

* `place(base, relative)`: the absolute path a write lands on. Every folder on the way is resolved (a symlinked
  folder is where it points), the final component is *not*: a symlink named as an output is a symlink, not the
  file it points to. `Path.resolve()` follows the final symlink too, which is how an engine once overwrote the
  file behind `build/demo.engine -> /elsewhere/precious.bin`.
* `safe_name(name)`: an engine, cell, variant or route name as one path component (never a separator, never
  `.`/`..`, never empty, bounded length). Build ids, evidence folders and output templates use it.
* `checked_target(path, within)`: the last check a writer makes before it opens anything (a symlink may appear
  between `trtls check` and the write): the real folder, the final name, refused with `UnsafeWrite` when the final
  component is a symlink or the real folder leaves `within`.

Plain Python (stdlib only): the CLI, the language server, the farm driver and the worker all import it.
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
from pathlib import Path

NAME_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")
MAX_NAME = 96  # well under every filesystem's 255-byte component, leaving room for ids and suffixes


def safe_name(name: object) -> str:
    """`name` as one safe path component: runs of anything but letters, digits, `_`, `.`, `-` become `_`; a name
    that starts with `.` (so `.` and `..`) gets a leading `_`; an empty one is `_`; a long one is cut and keeps a
    digest of the whole so two long names stay two."""
    text = NAME_UNSAFE.sub("_", str(name))
    if not text:
        return "_"
    if text.startswith("."):
        text = "_" + text
    if len(text) > MAX_NAME:
        digest = hashlib.sha256(str(name).encode("utf-8", "surrogatepass")).hexdigest()[:10]
        text = f"{text[: MAX_NAME - 11]}-{digest}"
    return text


def is_safe_name(name: object) -> bool:
    """True when `name` is already what `safe_name` makes of it (the recipe may use it as it is)."""
    return isinstance(name, str) and safe_name(name) == name


# Recipe keys whose string values are paths (the values of `matrix.precision` too): `path_text_problems` checks them
# before anything stats them (a 300-byte component makes os.stat raise ENAMETOOLONG, not answer "no such file").
PATH_KEYS = frozenset(
    {
        "onnx",
        "output",
        "path",
        "bundle",
        "previous_bundle",
        "reference_inputs",
        "canary_inputs",
        "shared_dir",
        "libraries",
        "serialize",
        "allow_outside",
    }
)
MAX_COMPONENT_BYTES = 255
# the record trtls writes beside every bundle (`<bundle>.trtls.json`: its digests, `origin: trtls` or `foreign`): the
# bundle package writes and reads it, the recipe check reads it to warn before a route build would replace a file
BUNDLE_SIDECAR_SUFFIX = ".trtls.json"
# the CycloneDX SBOM trtls writes beside every bundle (`<bundle>.cdx.json`; bundle.sbom writes and reads it)
BUNDLE_SBOM_SUFFIX = ".cdx.json"
MAX_PATH_BYTES = 4000


def path_text_problem(text: str) -> str | None:
    """Why `text` cannot name a file on this system (a NUL, a component or a whole path too long); None when it can."""
    if "\0" in text:
        return "the path contains a NUL character"
    raw = text.encode("utf-8", "surrogatepass")
    if len(raw) > MAX_PATH_BYTES:
        return f"the path is {len(raw)} bytes long (at most {MAX_PATH_BYTES})"
    longest = max((len(part) for part in raw.split(b"/")), default=0)
    if longest > MAX_COMPONENT_BYTES:
        return f"a name in the path is {longest} bytes long (at most {MAX_COMPONENT_BYTES})"
    return None


def path_text_problems(data: object) -> list[tuple[tuple[str | int, ...], str]]:
    """(TOML path, why) for every path-valued string of a parsed recipe that cannot name a file. Iterative."""
    out: list[tuple[tuple[str | int, ...], str]] = []
    stack: list[tuple[tuple[str | int, ...], object, bool]] = [((), data, False)]
    while stack:
        where, value, is_path = stack.pop()
        if isinstance(value, str):
            why = path_text_problem(value) if is_path else None
            if why is not None:
                out.append((where, why))
        elif isinstance(value, dict):
            precision = len(where) >= 2 and where[-2:] == ("matrix", "precision")
            stack.extend((where + (k,), v, is_path or k in PATH_KEYS or precision) for k, v in value.items())
        elif isinstance(value, list):
            stack.extend((where + (i,), v, is_path) for i, v in enumerate(value))
    return out


def place(base: str | os.PathLike[str], relative: str | os.PathLike[str]) -> Path:
    """The absolute path `relative` (relative to `base`, or absolute) names, with its folders resolved and its final
    component left as written (a final symlink is not followed). Raises ValueError for a NUL byte."""
    joined = Path(base) / relative
    if "\0" in str(joined):
        raise ValueError("path contains a NUL character")
    name = joined.name
    if name in ("", ".."):
        return Path(os.path.realpath(joined))  # the path names a folder itself: nothing final to keep
    return Path(os.path.realpath(joined.parent)) / name


def user_cache_dir() -> Path:
    """trtls's per-user cache folder: `$XDG_CACHE_HOME/trtls`, else `~/.cache/trtls` (the engine store and the warm
    farm's state live there). A relative XDG_CACHE_HOME is ignored, as the XDG base directory specification says: it
    would put them wherever a command happens to run (in a recipe's folder, beside its models), a place no one chose."""
    base = os.environ.get("XDG_CACHE_HOME", "")
    return Path(base if os.path.isabs(base) else Path.home() / ".cache") / "trtls"


def real(path: str | os.PathLike[str]) -> Path:
    """Every symlink followed (what a read of `path` opens)."""
    return Path(os.path.realpath(path))


def inside(path: Path, folder: Path) -> bool:
    return path == folder or path.is_relative_to(folder)


def lexically_inside(base: Path, relative: str, folder: Path) -> bool:
    """Whether `relative` stays in `folder` by its text alone (`..` undone without looking at the disk): a path
    that is inside by its text but outside for real goes through a symlinked folder."""
    return inside(Path(os.path.normpath(Path(base) / relative)), folder)


def write_root(recipe_folder: str | os.PathLike[str], output: str | os.PathLike[str]) -> Path:
    """The folder a write to `output` must still land in when it happens (`within` of the atomic writer): the
    recipe's real folder, or for a path `allow_outside` let out, its real folder as the policy judged it. The policy
    judges the recipe when it loads; a folder swapped for a symlink after that is refused at the write."""
    root = real(recipe_folder)
    folder = real(Path(output).parent)
    return root if inside(folder, root) else folder


class UnsafeWrite(OSError):
    """A write refused at the last moment: its final component is a symlink, or its real folder leaves the folder
    the writer was told to stay in. The file and everything it points to are untouched."""


def checked_target(path: str | os.PathLike[str], within: str | os.PathLike[str] | None = None) -> tuple[Path, str]:
    """(real folder, final name) of a file about to be written; raises UnsafeWrite (nothing touched) when the name
    is a symlink or names no file, or when the real folder is not inside `within`'s real path."""
    target = Path(path)
    name = target.name
    if name in ("", ".", ".."):
        raise UnsafeWrite(errno.EISDIR, "not a file name", str(target))
    folder = real(target.parent if str(target.parent) else ".")
    if within is not None and not inside(folder, real(within)):
        raise UnsafeWrite(errno.EXDEV, f"the real folder {folder} is outside {real(within)}", str(target))
    final = folder / name
    if final.is_symlink():
        raise UnsafeWrite(
            errno.ELOOP, f"is a symlink (to {os.readlink(final)}); trtls never writes through one", str(final)
        )
    return folder, name
