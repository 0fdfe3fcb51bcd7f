"""Atomic file replacement: readers see the old file or the new one, never half of one."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def replacing(path: Path, *, suffix: str = "") -> Iterator[Path]:
    """Yield a sibling temporary path to write; on success rename it over ``path``.

    On any exception the temporary file is removed and the exception propagates
    (``path`` is untouched). ``suffix`` keeps an extension that matters to the writer
    (``.gz``).
    """
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}{suffix}")
    try:
        yield tmp
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_text(path: Path, text: str) -> None:
    with replacing(path) as tmp:
        tmp.write_text(text)


def write_bytes(path: Path, data: bytes) -> None:
    with replacing(path) as tmp:
        tmp.write_bytes(data)
