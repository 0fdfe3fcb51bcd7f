"""JSON text of a report: orjson, compact by default, two-space indent for people.

The stdlib encoder with ``indent`` falls back to its pure-Python path (about 40x slower
than orjson on a 4 096-host report). NaN and infinities become ``null`` (valid JSON, as
``snapshot._num`` already makes them); numpy scalars and arrays are written as numbers and
lists; non-string keys become strings as ``json.dumps`` writes them.
"""

from __future__ import annotations

from typing import Any

import orjson

_OPTIONS = orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS


def encode(obj: Any, *, pretty: bool = False) -> str:
    """``obj`` as JSON text ending in a newline; ``pretty`` indents by two spaces."""
    options = _OPTIONS | orjson.OPT_APPEND_NEWLINE
    if pretty:
        options |= orjson.OPT_INDENT_2
    return orjson.dumps(obj, option=options).decode()
