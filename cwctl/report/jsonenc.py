"""JSON of a report: orjson, compact by default, two-space indent for people.

The stdlib encoder with ``indent`` falls back to its pure-Python path (about 40x slower
than orjson on a 4 096-host report). NaN and infinities become ``null`` (valid JSON, as
``snapshot._num`` already makes them); numpy scalars and arrays are written as numbers and
lists; non-string keys become strings as ``json.dumps`` writes them.

``encode_chunks`` writes an object whose one list is long (a scan's paths: 200 000 at
10 000 hosts) a chunk of that list at a time (``CHUNK`` items), so neither the whole tree
of dicts nor the whole text is ever held; its bytes are exactly ``encode_bytes``'s of the
whole object.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import orjson

from cwctl.runtime.gcpause import paused_gc

_OPTIONS = orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS
CHUNK = 4096  # list items encoded at a time


def _dumps(obj: Any, pretty: bool) -> bytes:
    return orjson.dumps(obj, option=_OPTIONS | orjson.OPT_INDENT_2 if pretty else _OPTIONS)


def encode_bytes(obj: Any, *, pretty: bool = False) -> bytes:
    """``obj`` as UTF-8 JSON ending in a newline; ``pretty`` indents by two spaces."""
    return _dumps(obj, pretty) + b"\n"


def encode(obj: Any, *, pretty: bool = False) -> str:
    """``encode_bytes`` as text."""
    return encode_bytes(obj, pretty=pretty).decode()


def encode_chunks(
    obj: dict[str, Any], key: str, chunks: Iterable[list[Any]], *, pretty: bool = False
) -> Iterator[bytes]:
    """The bytes of ``encode_bytes(obj)`` with ``obj[key]`` (a placeholder that keeps the
    key's place) replaced by the items of ``chunks`` one after another, each chunk's
    items made (when ``chunks`` makes them) and encoded together."""
    keys = list(obj)
    at = keys.index(key)
    cut = 2 if pretty else 1  # "}" and, indented, the newline before it
    before = _dumps({k: obj[k] for k in keys[:at]}, pretty)[1:-cut]  # the members only
    space = b"\n  " if pretty else b""
    colon = b": " if pretty else b":"
    yield b"{" + (before + b"," if before else b"") + space + orjson.dumps(key) + colon + b"["
    it, first = iter(chunks), True
    while True:
        with paused_gc():  # a chunk's dicts: many objects, no cycles
            chunk = next(it, None)
            if chunk is None:
                break
            if not chunk:
                continue
            text = _dumps(chunk, pretty)[1:-cut]  # the items only
            del chunk
        if pretty:  # one level deeper than alone
            text = text.replace(b"\n", b"\n  ")
        yield text if first else b"," + text
        first = False
    after = _dumps({k: obj[k] for k in keys[at + 1 :]}, pretty)[1:-cut]  # made when due
    yield (b"" if first else space) + b"]" + (b"," + after if after else b"")
    yield (b"\n}" if pretty else b"}") + b"\n"
