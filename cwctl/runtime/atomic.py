"""Safe file output, the one way cwctl writes a file it replaces (``--out``, ``--heatmap``,
``--save-records``, the simulator's saved state): readers see the old file or the new one,
never half of one, and the path cannot be used to make cwctl write somewhere else.

- ``~`` is expanded; an empty path is refused.
- The target must be a regular file or not exist: a FIFO, a device (``/dev/full``), a
  socket or a directory is refused with one line naming it (exit 2).
- A **symlink** as the last component is refused ("give the real path"), not followed and
  not replaced: following would let a link planted in a shared directory (``/tmp``) aim
  the write at another file; replacing would silently turn the operator's link into a
  file. Symlinks in the directories above it are followed, as the shell does.
- The new content goes to a temporary file created with ``O_EXCL`` under a random name
  in the target's directory (``tempfile.mkstemp``: nobody can pre-plant it), is
  ``fsync``ed, given the mode (an existing file's mode is kept; a new file gets
  ``REPORT_MODE`` 0644 for reports, ``PRIVATE_MODE`` 0600 for records and state), and
  renamed over the target; the directory is ``fsync``ed after the rename.

``check_output(path, option)`` runs the same checks without writing: commands call it for
every output path before they start work, so a bad path fails in milliseconds, not after
a scan.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

from cwctl.errors import InputError

REPORT_MODE = 0o644  # --out, --heatmap
PRIVATE_MODE = 0o600  # --save-records, state files (journal-like)
STALE_TEMP_S = 60.0  # a temporary file of ``replacing`` this old was left by a killed writer


def expand(path: str | os.PathLike[str], option: str) -> Path:
    """``path`` with ``~`` expanded; an empty one is refused, naming ``option``."""
    text = os.fspath(path)
    if not text.strip():
        raise InputError(f"{option}: empty path")
    return Path(text).expanduser()


def check_output(path: str | os.PathLike[str], option: str = "output") -> Path:
    """The path to write (``~`` expanded) once it passes the checks above; ``InputError``
    (one line naming ``option`` and the path) otherwise. Writes nothing."""
    target = expand(path, option)
    try:
        st = os.lstat(target)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise InputError(f"{option} {target}: {exc.strerror}") from None
    if st is not None:
        if stat.S_ISLNK(st.st_mode):
            raise InputError(f"{option} {target}: is a symlink; give the real path")
        if stat.S_ISDIR(st.st_mode):
            raise InputError(f"{option} {target}: is a directory")
        if not stat.S_ISREG(st.st_mode):
            raise InputError(f"{option} {target}: not a regular file ({_kind(st.st_mode)})")
    parent = target.parent
    if not parent.is_dir():
        raise InputError(f"{option} {target}: no directory {parent}")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise InputError(f"{option} {target}: the directory {parent} is not writable")
    return target


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return "not a file"


@contextlib.contextmanager
def replacing(
    path: str | os.PathLike[str],
    *,
    suffix: str = "",
    mode: int = REPORT_MODE,
    option: str = "output",
) -> Iterator[Path]:
    """Yield a new temporary path (created empty, ``O_EXCL``) beside ``path`` to write;
    on success ``fsync`` it, set its mode and rename it over ``path``.

    On any exception the temporary file is removed and the exception propagates
    (``path`` is untouched). ``suffix`` keeps an extension that matters to the writer
    (``.gz``)."""
    target = check_output(path, option)
    try:
        keep = stat.S_IMODE(os.stat(target).st_mode)
    except FileNotFoundError:
        keep = mode
    fd, name = tempfile.mkstemp(
        prefix=f".{target.name}.", suffix=f".tmp{suffix}", dir=target.parent
    )
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        fd = os.open(tmp, os.O_RDONLY | os.O_NOFOLLOW)
        try:
            os.fchmod(fd, keep)
            os.fsync(fd)
        finally:
            os.close(fd)
        check_output(target, option)  # still not a FIFO/link/directory planted meanwhile
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    with contextlib.suppress(OSError):  # a directory that cannot be opened: rename is done
        fsync_dir(target.parent)


def private_dir(
    directory: str | os.PathLike[str], what: str, *, owned_link: bool = False, create: bool = True
) -> Path:
    """``directory`` as a private directory of this user, the path to use: created 0700
    when missing (``create``); refused (``InputError``, one line saying why) when it is
    not a directory, another user's, or writable by group or others, and when it is a
    symlink, unless ``owned_link``: then a symlink this user owns is resolved and its
    target checked the same way (a link someone else planted is refused)."""
    path = Path(directory)
    me = os.geteuid()
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        if not create:
            return path
        try:
            path.mkdir(mode=0o700, parents=True, exist_ok=True)
            st = os.lstat(path)
        except OSError as exc:
            raise InputError(f"cannot create the {what} {path}: {exc.strerror}") from None
    except OSError as exc:
        raise InputError(f"cannot use the {what} {path}: {exc.strerror}") from None
    if stat.S_ISLNK(st.st_mode):
        if not owned_link:
            raise InputError(f"refusing the {what} {path}: it is a symlink (use a directory)")
        if st.st_uid != me:
            raise InputError(
                f"refusing the {what} {path}: a symlink owned by uid {st.st_uid}, not by you "
                f"(uid {me}); point it at a directory of your own, or set it to one"
            )
        path = path.resolve()
        try:
            st = os.stat(path)
        except OSError as exc:
            raise InputError(
                f"cannot use the {what} {directory}: its symlink's target {path}: {exc.strerror}"
            ) from None
    if not stat.S_ISDIR(st.st_mode):
        raise InputError(f"refusing the {what} {path}: not a directory")
    if st.st_uid != me:
        raise InputError(
            f"refusing the {what} {path}: owned by uid {st.st_uid}, not by you (uid {me})"
        )
    if st.st_mode & 0o022:
        raise InputError(
            f"refusing the {what} {path}: writable by group or others "
            f"(mode {stat.S_IMODE(st.st_mode):04o}); chmod go-w {path}"
        )
    return path


def remove_stale_temporaries(target: Path, older_than_s: float = STALE_TEMP_S) -> int:
    """Remove the temporary files ``replacing`` leaves beside ``target`` when the writer
    is killed (``.NAME.*.tmp``), once older than ``older_than_s`` (a live writer's is
    seconds old); how many went."""
    removed = 0
    now = time.time()
    for tmp in target.parent.glob(f".{target.name}.*.tmp*"):
        try:
            st = tmp.lstat()
            if stat.S_ISREG(st.st_mode) and now - st.st_mtime > older_than_s:
                tmp.unlink()
                removed += 1
        except OSError:
            continue
    return removed


def fsync_dir(directory: str | os.PathLike[str]) -> None:
    """Make the entries of ``directory`` durable (a rename into it, a file created in it):
    ``fsync`` on the directory itself. ``OSError`` if it cannot be opened."""
    dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def write_text(
    path: str | os.PathLike[str], text: str, *, mode: int = REPORT_MODE, option: str = "output"
) -> None:
    with replacing(path, mode=mode, option=option) as tmp:
        tmp.write_text(text)


def write_bytes(
    path: str | os.PathLike[str], data: bytes, *, mode: int = REPORT_MODE, option: str = "output"
) -> None:
    write_chunks(path, (data,), mode=mode, option=option)


def write_chunks(
    path: str | os.PathLike[str],
    chunks: Iterable[bytes],
    *,
    mode: int = REPORT_MODE,
    option: str = "output",
) -> None:
    """``write_bytes`` of the pieces ``chunks`` yields, written as they come."""
    with replacing(path, mode=mode, option=option) as tmp, open(tmp, "wb") as f:
        for chunk in chunks:
            f.write(chunk)
