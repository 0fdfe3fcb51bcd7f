"""The journal file: one JSON object per line, appended, never rewritten; the action lock.

``$CWCTL_STATE_DIR/journal.jsonl`` (``cwctl.settings.state_dir``). Each append takes an exclusive
``fcntl.flock`` on the file, writes one whole line and ``fsync``s it before the lock is
released, so concurrent cwctl processes never interleave and a crash loses at most the
line being written. Readers take a shared lock.

A line cut short by a crash (power cut, full disk) has no newline: a reader reports it as
*torn* and ignores it; the next append first ends it with a newline, so the new entry is
always on a line of its own (never glued to the torn one). A line in the middle that does
not parse is reported and skipped, never fatal.

What the lines mean (a write-ahead log of each action: intent, step outcomes, end) is
``history.py``'s business; docs/actions.md describes the states and recovery.

Trust: the journal and the lock are read only when they (and the directory) belong to
the user running cwctl and are not writable by group or others; rollback runs the
commands a journal stores, so a journal someone else could write is refused (exit 2).
Both are opened with ``O_NOFOLLOW``: a symlink in their place is refused too. A reader
that runs none of its commands (``Journal(shared=True)``: job-env in a job's TaskProlog)
may read the operator's journal: only its owner may write it and the directory.

``ActionLock`` serialises actions: one apply or rollback at a time per state directory.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import getpass
import json
import os
import signal
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cwctl.errors import CwctlError, InputError
from cwctl.runtime.atomic import fsync_dir, private_dir
from cwctl.settings import state_dir

JOURNAL_SCHEMA = "cwctl.journal/2"
JOURNAL_FILE = "journal.jsonl"
LOCK_FILE = "action.lock"
JOURNAL_LIMIT = 256 << 20  # bytes read at most: some 50 000 actions
FAILPOINT_ENV = "CWCTL_FAILPOINT"  # "journal:N": stop (SIGSTOP) before this process's Nth append

_appends = 0


@dataclass
class JournalRead:
    entries: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # "journal.jsonl:LINE: why"
    torn: str | None = None  # the report of a torn last line, when there is one


def check_owned(fd: int, path: Path, what: str) -> None:
    """Refuse ``path`` (open as ``fd``) unless it is a regular file (or a directory, for
    the state directory) of this user that group and others cannot write."""
    st = os.fstat(fd)
    if not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
        raise InputError(f"refusing the {what} {path}: not a regular file")
    me = os.geteuid()
    if st.st_uid != me:
        raise InputError(
            f"refusing the {what} {path}: owned by uid {st.st_uid}, not by you (uid {me}); "
            "set CWCTL_STATE_DIR to a directory of your own"
        )
    if st.st_mode & 0o022:
        raise InputError(
            f"refusing the {what} {path}: writable by group or others "
            f"(mode {stat.S_IMODE(st.st_mode):04o}); chmod go-w {path}"
        )


def open_state_dir(directory: Path) -> int:
    """The state directory, created 0700 when missing, checked, as an ``O_DIRECTORY`` fd
    (a symlink the user owns is followed to its target, which is checked the same way)."""
    directory = private_dir(directory, "state directory", owned_link=True)
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        raise InputError(
            f"cannot use the state directory {directory}: {exc.strerror} (set CWCTL_STATE_DIR)"
        ) from None
    try:
        check_owned(fd, directory, "state directory")
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_checked(path: Path, flags: int, what: str) -> int:
    """``os.open`` without following a symlink, then the ownership checks; 0600 when new."""
    dir_fd = open_state_dir(path.parent)
    try:
        # O_NONBLOCK: a FIFO in its place opens at once (and is refused below), not never
        flags |= os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
        fd = os.open(path.name, flags, 0o600, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == 40:  # ELOOP: a symlink where the file should be
            raise InputError(f"refusing the {what} {path}: it is a symlink") from None
        raise InputError(f"cannot open the {what} {path}: {exc.strerror}") from None
    finally:
        os.close(dir_fd)
    try:
        check_owned(fd, path, what)
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_shared(path: Path, what: str) -> int:
    """``path`` opened for a reader that runs none of the commands it holds (job-env, as
    a job's user in a Slurm TaskProlog): the state directory and the file may belong to
    another user (the operator), but neither may be writable by group or others, so only
    its owner can have written it; a symlink in the file's place is refused."""
    try:
        dir_fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise InputError(
            f"cannot read the {what} {path}: {path.parent}: {exc.strerror} "
            "(its owner may chmod 0711 the directory and 0644 the file)"
        ) from None
    try:
        _not_writable_by_others(dir_fd, path.parent, "state directory")
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        fd = os.open(path.name, flags, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise InputError(f"refusing the {what} {path}: it is a symlink") from None
        raise InputError(
            f"cannot read the {what} {path}: {exc.strerror} (its owner may chmod 0644 it)"
        ) from None
    finally:
        os.close(dir_fd)
    try:
        _not_writable_by_others(fd, path, what)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _not_writable_by_others(fd: int, path: Path, what: str) -> None:
    st = os.fstat(fd)
    if not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
        raise InputError(f"refusing the {what} {path}: not a regular file")
    if st.st_mode & 0o022:
        raise InputError(
            f"refusing the {what} {path}: writable by group or others "
            f"(mode {stat.S_IMODE(st.st_mode):04o})"
        )


def _failpoint() -> None:
    """Testing failpoint (as etcd's gofail): ``CWCTL_FAILPOINT=journal:N`` stops this
    process with SIGSTOP just before its Nth journal append, so a test can kill it there."""
    global _appends
    _appends += 1
    if os.environ.get(FAILPOINT_ENV) == f"journal:{_appends}":
        os.kill(os.getpid(), signal.SIGSTOP)


class JournalWriteError(CwctlError):
    """A journal line could not be written (a full disk, a read-only state directory)."""


FALLOC_FL_KEEP_SIZE = 1  # include/uapi/linux/falloc.h


def _reserve_blocks(fd: int, offset: int, nbytes: int) -> None:
    """Allocate the disk blocks for ``nbytes`` past ``offset`` without changing the file's
    size (Linux ``fallocate(FALLOC_FL_KEEP_SIZE)``): later appends there cannot meet a
    full disk. OSError(ENOSPC) when there is no room; EOPNOTSUPP where the file system
    cannot."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    fallocate = libc.fallocate
    fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_longlong, ctypes.c_longlong]
    if fallocate(fd, FALLOC_FL_KEEP_SIZE, offset, nbytes) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


class Journal:
    def __init__(self, directory: Path | None = None, *, shared: bool = False) -> None:
        """``shared``: read only, and from a journal of another user (``open_shared``)."""
        self.directory = directory or state_dir()
        self.path = self.directory / JOURNAL_FILE
        self.shared = shared

    def append(self, entry: dict[str, Any], *, sync_dir: bool = False) -> None:
        """Append ``entry`` as one line, durably (``fsync``; with ``sync_dir`` the
        directory too, so a newly created journal survives a crash)."""
        if self.shared:
            raise CwctlError(f"the journal {self.path} was opened to be read only")
        _failpoint()
        entry = {"schema": JOURNAL_SCHEMA, **entry}
        line = (json.dumps(entry, sort_keys=True, separators=(",", ":")) + "\n").encode()
        fd = open_checked(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, "journal")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            size = os.fstat(fd).st_size
            if size and os.pread(fd, 1, size - 1) != b"\n":
                line = b"\n" + line  # end a torn last line first: never glue to it
            view = memoryview(line)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        except OSError as exc:
            raise JournalWriteError(
                f"cannot write the journal {self.path}: {exc.strerror}"
            ) from None
        finally:
            os.close(fd)  # closing releases the lock
        if sync_dir:
            fsync_dir(self.directory)

    def reserve(self, nbytes: int) -> None:
        """Make sure the next ``nbytes`` of journal lines can be written: their blocks
        allocated now, past the journal's end (a full state directory refuses here,
        before anything is touched). Where the file system cannot reserve, room for them
        is checked with a scratch file instead (a check, not a guarantee)."""
        fd = open_checked(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, "journal")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                _reserve_blocks(fd, os.fstat(fd).st_size, nbytes)
            except OSError as exc:
                if exc.errno not in (errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):
                    raise
                self._check_room(nbytes)
        except OSError as exc:
            raise JournalWriteError(
                f"the state directory {self.directory} has no room for this action's journal "
                f"({nbytes:,} bytes): {exc.strerror}: nothing applied"
            ) from None
        finally:
            os.close(fd)

    def _check_room(self, nbytes: int) -> None:
        scratch = self.directory / f".{JOURNAL_FILE}.room"
        fd = os.open(scratch, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            os.posix_fallocate(fd, 0, nbytes)
        finally:
            os.close(fd)
            scratch.unlink(missing_ok=True)

    def read(self) -> JournalRead:
        out = JournalRead()
        if self.shared:
            try:
                fd = open_shared(self.path, "journal")
            except InputError:  # nothing journalled yet is no action; a directory this
                # user cannot search is said, never taken for "no action"
                if not os.path.lexists(self.directory):
                    return out
                if os.access(self.directory, os.X_OK) and not os.path.lexists(self.path):
                    return out
                raise
        elif not self.path.exists() and not self.path.is_symlink():
            return out
        else:
            fd = open_checked(self.path, os.O_RDONLY, "journal")
        with os.fdopen(fd, "rb") as f:
            fcntl.flock(f.fileno(), fcntl.LOCK_SH)
            size = os.fstat(f.fileno()).st_size
            if size > JOURNAL_LIMIT:
                raise InputError(
                    f"the journal {self.path} is {size} bytes, more than {JOURNAL_LIMIT}: "
                    "move it aside (its actions stay listed there) to start a new one"
                )
            data = f.read(JOURNAL_LIMIT + 1)
        lines = data.split(b"\n")
        last = len(lines)
        for n, raw in enumerate(lines, 1):
            if not raw.strip():
                continue
            if n == last:  # no newline after it: a write cut short
                out.torn = (
                    f"{self.path}:{n}: the last line is torn (a write cut short by a crash "
                    f"or a full disk, {len(raw)} bytes): ignored"
                )
                break
            try:
                entry = json.loads(raw)
                if not isinstance(entry, dict) or "id" not in entry or "event" not in entry:
                    raise ValueError("not a journal entry")
            except (ValueError, UnicodeDecodeError) as exc:
                out.skipped.append(f"{self.path}:{n}: skipped, unreadable ({exc})")
                continue
            out.entries.append(entry)
        if out.torn:
            out.skipped.append(out.torn)
        return out


class LockHeld(CwctlError):
    """Another cwctl action holds the action lock: nothing was read or changed."""


class ActionLock:
    """One action at a time per state directory (``flock`` on ``action.lock``)."""

    def __init__(self, directory: Path | None = None) -> None:
        self.path = (directory or state_dir()) / LOCK_FILE
        self._fd: int | None = None

    def __enter__(self) -> ActionLock:
        fd = open_checked(self.path, os.O_RDWR | os.O_CREAT, "action lock")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
            os.close(fd)
            raise LockHeld(
                f"another cwctl action is running (pid {holder}, lock {self.path}); "
                "wait for it to finish"
            ) from None
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, str(os.getpid()).encode(), 0)
        except OSError as exc:  # a full state directory: nothing has been touched yet
            os.close(fd)
            raise CwctlError(
                f"cannot write the action lock {self.path}: {exc.strerror}: nothing applied"
            ) from None
        self._fd = fd
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def release(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, 0)
            os.close(self._fd)
            self._fd = None

    @property
    def held(self) -> bool:
        return self._fd is not None


def acting_user() -> str:
    """The local user who acts, for the journal's BY column ("?" where none is named)."""
    try:
        return getpass.getuser()
    except (OSError, KeyError):
        return "?"
