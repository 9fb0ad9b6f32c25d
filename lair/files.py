"""Writing output files safely: whole or not at all, never through a symlink.

Every file dtg writes (PE modules, reports, output tensors) goes through
:func:`write_atomically`: the content is written to a temporary file in the target's
directory and renamed over the target, so an error or a crash never leaves a
half-written file, and a reader never sees one. An existing symlink is refused rather
than followed (it could point anywhere), and so is a directory or a special file.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import IO

from dtg.errors import InputError


def _umask() -> int:
    """The process's umask, read without changing it where the system says it
    (Linux's /proc), else by setting and restoring it once."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    mask = os.umask(0)
    os.umask(mask)
    return mask


def file_mode() -> int:
    """The mode a new file gets under the user's umask (temporary files start as 0600,
    so the mode is set explicitly)."""
    return 0o666 & ~_umask()


def check_writable_target(path: str | os.PathLike[str], what: str) -> Path:
    """``path`` as a Path, or an error if writing ``what`` there would replace something
    other than a regular file (a symlink, a directory, a device)."""
    path = Path(path)
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return path
    except OSError as exc:
        raise InputError(f"cannot write {what} {path}: {exc.strerror}") from None
    if stat.S_ISLNK(info.st_mode):
        raise InputError(f"cannot write {what} {path}: it is a symbolic link, which dtg does "
                         "not follow; remove it or name another file")
    if stat.S_ISDIR(info.st_mode):
        raise InputError(f"cannot write {what} {path}: it is a directory")
    if not stat.S_ISREG(info.st_mode):
        raise InputError(f"cannot write {what} {path}: it is not a regular file (a device, "
                         "pipe or socket)")
    return path


def _identity(path: Path) -> tuple[str, object]:
    """What makes two paths the same file: the device and inode of an existing file
    (hard links, symlinks and ``..`` included, also after a directory that does not
    exist yet, as in ``new/../q.lair``), else the resolved path."""
    real = os.path.realpath(path)
    try:
        info = os.stat(real)
    except OSError:
        return ("path", real)
    return ("inode", (info.st_dev, info.st_ino))


def check_distinct(outputs: Iterable[tuple[str | os.PathLike[str] | None, str]],
                   inputs: Iterable[tuple[str | os.PathLike[str] | None, str]] = ()) -> None:
    """Refuse, before any work, an output that is or resolves to one of the command's
    inputs, or to another of its outputs: writing it would destroy what the command
    reads, or one output would silently replace the other. Entries are ``(path, what)``;
    ``None`` paths and ``-`` (standard input or output) are skipped."""
    seen: dict[tuple[str, object], tuple[str, str]] = {}
    for path, what in inputs:
        if path is not None and str(path) != "-":
            seen.setdefault(_identity(Path(path)), (str(path), what))
    for path, what in outputs:
        if path is None or str(path) == "-":
            continue
        key = _identity(Path(path))
        if key in seen:
            other, other_what = seen[key]
            same = "is" if other == str(path) else f"is the same file as {other},"
            raise InputError(f"cannot write {what} to {path}: it {same} {other_what}; "
                             "name another file (nothing was written)")
        seen[key] = (str(path), what)


def check_new_file(path: str | os.PathLike[str], what: str) -> Path:
    """:func:`check_writable_target`, and the directory it goes into must exist: for
    files named on the command line, checked before any work is done."""
    target = check_writable_target(path, what)
    parent = target.parent
    if not parent.is_dir():
        raise InputError(f"cannot write {what} {target}: the directory {parent} does not exist")
    return target


def write_atomically(path: str | os.PathLike[str],
                     content: str | bytes | Callable[[IO[bytes]], None],
                     what: str = "the file") -> None:
    """Write ``content`` (text, bytes, or a function writing to a binary handle) to
    ``path`` via a temporary file in the same directory and :func:`os.replace`."""
    path = check_writable_target(path, what)
    parent = path.parent
    try:
        # (the name is cut so that a target name of up to 255 bytes still leaves room)
        fd, tmp = tempfile.mkstemp(dir=parent, prefix=f".{path.name[:200]}.", suffix=".tmp")
    except OSError as exc:
        raise InputError(f"cannot write {what} {path}: {exc.strerror}") from None
    try:
        with os.fdopen(fd, "wb") as handle:
            if isinstance(content, str):
                handle.write(_utf8(content, what))
            elif isinstance(content, bytes):
                handle.write(content)
            else:
                content(handle)
        os.chmod(tmp, file_mode())
        check_writable_target(path, what)  # it may have become a symlink meanwhile
        os.replace(tmp, path)
    except OSError as exc:
        _discard(tmp)
        raise InputError(f"cannot write {what} {path}: {exc.strerror}") from None
    except BaseException:
        _discard(tmp)
        raise


def _utf8(text: str, what: str) -> bytes:
    """``text`` as UTF-8, or an error where it holds a file name that is not UTF-8 (its
    bytes reach Python as lone surrogates, which no UTF-8 file can hold)."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        first = text.rfind("\n", 0, exc.start) + 1
        last = text.find("\n", exc.end)
        line = text[first:last if last >= 0 else len(text)].strip()[:200]
        raise InputError(f"cannot write {what}: it would name a file whose name is not "
                         f"valid UTF-8, in the line {line!a}; rename that file") from None


def _discard(tmp: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(tmp)


def stat_input(path: Path) -> os.stat_result:
    """The status of an input file, or an error when it is missing, unreadable or a
    directory (checked before opening: reading a directory or a pipe could block)."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise InputError(f"no such file: {path}") from None
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror}") from None
    if stat.S_ISDIR(info.st_mode):
        raise InputError(f"{path} is a directory, expected a file")
    return info


def check_input_file(path: str | Path) -> Path:
    """``path`` as a Path, or an error unless it is an existing regular file (a directory,
    a device or a pipe is refused before it is opened: reading one could block forever)."""
    path = Path(path)
    info = stat_input(path)
    if not stat.S_ISREG(info.st_mode):
        raise InputError(f"{path} is not a regular file (a device, pipe or socket)")
    return path


def output_path(path: str | Path | None) -> str | Path | None:
    """An output path as :func:`lair.files.check_distinct` should compare it: where a
    directory on the way does not exist yet (``-o new/../prog.lair``), the path with
    ``..`` resolved, which is the file it will become once the directory is made."""
    if path is None or str(path) == "-" or Path(path).parent.exists():
        return path
    return os.path.realpath(path)
