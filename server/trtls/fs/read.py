"""Reading files a user, a recipe, a store or a record names: regular files only, bounded, and (for records and
store entries) never through a final symlink.

A FIFO would hang a read, `/dev/zero` would fill memory or a disk, a 10 GB `entry.json` would exhaust memory: each
is refused before a byte is read (the open is O_NONBLOCK, then fstat decides). `limit` is the most bytes a file of
this use can hold; `expected` is the exact size a record promised (a store entry's engine), checked too. `owned`: a
record trtls trusts instead of reading what it stands for (the fast path's memo: where an engine goes and which store
and trust serve it; the digest cache and the external-data index: what a model's bytes are) is taken only from a file
this account (or root) owns and no other account can write, judged on the descriptor that is read — another account
that can write the folder could otherwise copy it and change it.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

from trtls.core.paths import UnsafeWrite, inside, real
from trtls.fs.folder import _CLOEXEC, _NOFOLLOW
from trtls.fs.kinds import ENGINE_HEAD, engine_replace_refusal

_NONBLOCK = getattr(os, "O_NONBLOCK", 0)


class TooLarge(UnsafeWrite):
    """A file larger than a read of its use may hold (or not of the size its record promised)."""


@contextlib.contextmanager
def open_regular(
    path: str | os.PathLike[str],
    *,
    limit: int | None,
    follow: bool = False,
    expected: int | None = None,
    within: str | os.PathLike[str] | None = None,
    owned: bool = False,
) -> Iterator[BinaryIO]:
    """A binary file object of the regular file at `path`. `follow=False` (records, store entries): a final
    symlink is refused; `follow=True` (a user's model and its external data, which may live in a cache through a
    link): the link is followed. With `within`, the real path (of the file, or without `follow` of its folder) must
    stay inside `within`. `owned`: the file must be this account's (or root's) and writable by no other account."""
    target = Path(path)
    if within is not None:  # a record's folder swapped for a link leading out is refused, not read through
        _refuse_outside(target, follow, within)
    flags = os.O_RDONLY | _NONBLOCK | _CLOEXEC | (0 if follow else _NOFOLLOW)
    try:
        fd = os.open(target, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP and not follow:
            raise UnsafeWrite(errno.ELOOP, "is a symlink; trtls never reads a record through one", str(path)) from None
        if within is not None:  # a folder on the way swapped for a link since the check: that, not "no such file"
            _refuse_outside(target, follow, within)
        raise
    try:
        if within is not None:
            # the check above is by name, the open by name again: a folder on the way swapped for a link in between
            # (the 20,000-state run of 2026-12-04 swapped `.trtls` there) is caught by where the open really landed
            _refuse_opened_outside(fd, target, within)
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise UnsafeWrite(errno.EISDIR, "is a folder, not a file", str(path))
        if not stat.S_ISREG(st.st_mode):
            raise UnsafeWrite(errno.EINVAL, "is not a regular file (a FIFO, a device or a socket)", str(path))
        if limit is not None and st.st_size > limit:
            raise TooLarge(
                errno.EFBIG, f"is {st.st_size} bytes, more than the {limit} a file of this use holds", str(path)
            )
        if expected is not None and st.st_size != expected:
            raise TooLarge(errno.EBADMSG, f"is {st.st_size} bytes, not the {expected} its record says", str(path))
        if owned:
            _refuse_foreign(st, path)
        os.set_blocking(fd, True)
        handle = os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    with handle:
        yield handle


def _refuse_foreign(st: os.stat_result, path: object) -> None:
    """A file another account wrote, or one any other account could have rewritten, is not this account's record."""
    if st.st_uid not in (os.geteuid(), 0):
        raise UnsafeWrite(
            errno.EPERM, f"belongs to another account (uid {st.st_uid}); trtls acts only on its own records", str(path)
        )
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise UnsafeWrite(
            errno.EPERM, "is writable by other accounts; trtls acts only on records no one else can rewrite", str(path)
        )


def _refuse_outside(target: Path, follow: bool, within: str | os.PathLike[str]) -> None:
    resolved = real(target) if follow else real(target.parent) / target.name
    if not inside(resolved, real(within)):
        raise UnsafeWrite(errno.EXDEV, f"leads out of {real(within)} (to {resolved})", str(target))


def _refuse_opened_outside(fd: int, target: Path, within: str | os.PathLike[str]) -> None:
    """The file `fd` is open on must lie inside `within` (its path from /proc; where there is none, the check by
    name before the open stands alone)."""
    try:
        opened = Path(os.readlink(f"/proc/self/fd/{fd}"))
    except OSError:
        return
    if opened.is_absolute() and not inside(opened, real(within)):
        raise UnsafeWrite(errno.EXDEV, f"leads out of {real(within)} (to {opened}) as it was opened", str(target))


def read_bytes(
    path: str | os.PathLike[str],
    *,
    limit: int | None,
    follow: bool = False,
    expected: int | None = None,
    within: str | os.PathLike[str] | None = None,
    owned: bool = False,
) -> bytes:
    """The whole file, refused when it is not a regular file or larger than `limit` (also when it grows past it
    while read); `owned`: see `open_regular`."""
    with open_regular(path, limit=limit, follow=follow, expected=expected, within=within, owned=owned) as handle:
        data = handle.read(limit + 1) if limit is not None else handle.read()
    if limit is not None and len(data) > limit:
        raise TooLarge(errno.EFBIG, f"grew past {limit} bytes while it was read", str(path))
    return data


def read_text(
    path: str | os.PathLike[str],
    *,
    limit: int | None,
    follow: bool = False,
    within: str | os.PathLike[str] | None = None,
    errors: str = "strict",
    owned: bool = False,
) -> str:
    """`read_bytes` decoded as UTF-8."""
    return read_bytes(path, limit=limit, follow=follow, within=within, owned=owned).decode("utf-8", errors)


_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
_SURROGATE_ESCAPE_TEXT = re.compile(r"\\u[dD][89a-fA-F]")  # `\ud800`…`\udfff` in the raw text: rare, checked then


def refuse_lone_surrogates(text: str | bytes, value: Any) -> Any:
    """`value`, parsed from `text`, unless a string in it holds a lone UTF-16 surrogate (`"\ud800"`): JSON's escapes
    decode to one, and the first `.encode("utf-8")` of it — a sidecar written, a digest of a name — ended a command in
    a UnicodeEncodeError traceback. ValueError then, as for any text that is not a record; looked for only when the
    text holds such an escape at all."""
    found = _SURROGATE_ESCAPE_TEXT.search(text) if isinstance(text, str) else _SURROGATE_ESCAPE.search(text)
    if found is None:  # the common case: one scan of the text as it came, no copy of it
        return value
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("a string holds a lone UTF-16 surrogate (\\ud800-\\udfff): not text") from None
    return value


def parse_json(text: str | bytes) -> Any:
    """`json.loads`, where JSON nested deeper than the parser's stack (`[[[[…` 3,000 deep in a planted record) is a
    ValueError like any other text that is not JSON; `json.loads` raises RecursionError, which no reader's
    `except ValueError` takes, so a record another user damaged ended a command in a traceback. A string holding a
    lone surrogate is refused the same way (`refuse_lone_surrogates`)."""
    try:
        return refuse_lone_surrogates(text, json.loads(text))
    except RecursionError:
        raise ValueError("nested deeper than the JSON parser can read") from None


class UnreadableRecord(Exception):
    """A JSON record that cannot be read or is not JSON; `str()` says why, without the path."""


def read_json_record(path: str | os.PathLike[str], *, limit: int, within: str | os.PathLike[str] | None = None) -> Any:
    """A JSON record trtls wrote (a summary, a run's running.json, a result): a regular file (a FIFO, a device, a
    folder or a final symlink is refused before a byte is read), at most `limit` bytes, inside `within` when given,
    UTF-8, JSON. The one place that turns each way of not being one into its reason (UnreadableRecord), for the
    record's own problem type."""
    try:
        text = read_text(path, limit=limit, follow=False, within=within)
    except OSError as exc:
        raise UnreadableRecord(f"cannot read ({exc.strerror or exc})") from None
    except ValueError as exc:  # bytes that are not UTF-8
        raise UnreadableRecord(f"not valid JSON ({exc})") from None
    try:
        return parse_json(text)
    except ValueError as exc:
        raise UnreadableRecord(f"not valid JSON ({exc})") from None


def engine_output_refusal(path: str | os.PathLike[str]) -> str | None:
    """Why an engine may not replace the file now at `path` (`fs.kinds.engine_replace_refusal`, the rule the door
    applies at the write), for the recipe check (TRT123); None when it may, or when there is no regular file there
    (a folder, a symlink, a FIFO: refused by their own findings and by the door)."""
    try:
        with open_regular(path, limit=None) as fh:
            head: bytes | None = fh.read(ENGINE_HEAD)
    except PermissionError:
        head = None
    except (OSError, ValueError):
        return None
    return engine_replace_refusal(head)
