"""One bounded way to read a TOML file that a long-running process may read again.

``cwctl watch`` reads its policy and inventory at start and again on every SIGHUP, so
what it reads must never end it: ``read_text`` opens without blocking (a FIFO would
hold ``open()`` for good) and takes a regular file only (``/dev/zero`` would be read
until memory runs out), at most ``limit`` bytes; ``parse`` turns every failure of
``tomllib`` (its syntax errors, nesting past the recursion limit, an integer of more
digits than Python converts) into one problem line ``FILE:LINE: ...``. Both raise
``TomlFileError``; each caller wraps its problem line in its own error type.
"""

from __future__ import annotations

import os
import re
import stat
import tomllib
from pathlib import Path
from typing import Any, Final

from cwctl.config.tomlcheck import syntax_problem

POLICY_LIMIT: Final = 1 << 20  # bytes: a policy is a few hundred
INVENTORY_LIMIT: Final = 64 << 20  # bytes: 10 000 hosts take about 1.5 MB


class TomlFileError(Exception):
    """A file that cannot be read or parsed; ``problem`` is its one line."""

    def __init__(self, problem: str) -> None:
        self.problem = problem
        super().__init__(problem)


def read_text(path: Path, what: str, limit: int) -> str:
    """The UTF-8 text of ``path`` (a byte-order mark dropped), a regular file of at most
    ``limit`` bytes; ``what`` names it in problems ("policy file", "inventory file")."""
    label = str(path)
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise TomlFileError(f"{label}: no such {what}") from None
    except OSError as exc:
        raise TomlFileError(f"{label}: cannot read: {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise TomlFileError(f"{label}: is a directory, not a {what}")
        if not stat.S_ISREG(st.st_mode):
            kind = "a FIFO" if stat.S_ISFIFO(st.st_mode) else "a device or socket"
            raise TomlFileError(f"{label}: is {kind}, not a regular file: not read")
        if st.st_size > limit:
            raise TomlFileError(f"{label}: {st.st_size} bytes, more than a {what} may be ({limit})")
        data = _read_at_most(fd, limit + 1)
    except OSError as exc:
        raise TomlFileError(f"{label}: cannot read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if len(data) > limit:  # it grew while being read
        raise TomlFileError(f"{label}: more than {limit} bytes, more than a {what} may be")
    try:
        return data.decode("utf-8-sig")  # an editor's byte-order mark is not an error
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise TomlFileError(f"{label}:{line}: not UTF-8 text (byte {exc.start})") from None


def _read_at_most(fd: int, size: int) -> bytes:
    chunks: list[bytes] = []
    left = size
    while left > 0:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def parse(text: str, label: str) -> dict[str, Any]:
    """``tomllib.loads(text)``; any failure one problem line naming ``label`` and a line."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise TomlFileError(syntax_problem(label, text, exc)) from None
    except RecursionError:
        lines = text.splitlines() or [""]
        line = max(range(len(lines)), key=lambda i: lines[i].count("[") + lines[i].count("{"))
        raise TomlFileError(f"{label}:{line + 1}: TOML syntax error: nested too deep") from None
    except ValueError:  # an integer past sys.get_int_max_str_digits()
        long_int = re.search(r"\d{4000,}", text)
        line = text[: long_int.start()].count("\n") + 1 if long_int else 1
        problem = f"{label}:{line}: TOML syntax error: an integer of too many digits"
        raise TomlFileError(problem) from None
