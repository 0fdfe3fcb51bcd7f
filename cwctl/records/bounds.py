"""The bounds a record file is read within, and text from it made safe for a terminal.

A record file (``--replay``) is data from anywhere: a 264-byte ``probes`` line with
scalar columns can claim a million rows, a 1 MB gzip can hold a 1 GiB line, a line can
nest ten thousand lists deep or carry a 20-digit integer. The reader (``cwctl.scan.recordfile``)
holds every file to these bounds, stated here once, and refuses past one with one line:

- a line: at most ``HEADER_MAX_CHARS`` for the header, ``line_max_chars(hosts)`` for the
  others (a fixed allowance plus a share per host the header lists: a truth record
  carries a few entries per path); it is read up to its bound and no further;
- nesting: ``MAX_DEPTH`` levels of objects and lists (records use five);
- numbers: integers within int64, floats finite (no ``NaN``/``Infinity``, no ``1e400``);
- the other lines (kept as parsed: hello, summary, gpu, path, truth): ``other_max_chars``
  in all, a fixed allowance plus a share per host;
- probe rows: ``rows_max(...)`` in all, from the header's peers, rate and duration
  (the rows the scan can have sent) with a margin; one record holds no more.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any, Final

from cwctl import settings
from cwctl.errors import RecordError

MAX_DEPTH: Final = 32
HEADER_MAX_CHARS: Final = 64 << 20  # the header of ~150 000 hosts
LINE_BASE_CHARS: Final = 4 << 20  # any other line: this, plus LINE_HOST_CHARS per host
LINE_HOST_CHARS: Final = 16 << 10  # a truth record's paths and offsets, per host, with room
OTHER_BASE_CHARS: Final = 16 << 20  # all lines but probe rows: this, plus per host ...
OTHER_HOST_CHARS: Final = 256 << 10  # ... its hello, summary, gpu, path and truth share
ROWS_MARGIN: Final = 2.0  # rows a file may hold: this times what its scan could send ...
ROWS_SLACK: Final = 1 << 16  # ... plus this (small synthetic files, rounding)
I64_MIN: Final = -(2**63)
I64_MAX: Final = 2**63 - 1

# an integer that may be beyond int64 (20 digits or more, or 19 from a 9: int64 ends at
# 9 223 372 036 854 775 807, so a nanosecond stamp's 19 digits from a 1 are no suspect),
# an exponent of three digits or more, or a JSON constant Python accepts (NaN,
# Infinity): only then is a parsed record walked for its numbers
_SUSPECT_NUMBER: Final = re.compile(r"\d{20,}|9\d{18}|[eE][+-]?\d{3,}|NaN|Infinity")
# what ``wide_integer`` looks for: orjson reads every other number as json does
_DIGITS_AS_ZERO: Final = str.maketrans("123456789", "000000000")
_NINE_AND_18: Final = re.compile(r"9\d{18}")
# C0 and C1 controls and DEL: what a terminal takes as a command, or a line break
_CONTROL: Final = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def line_max_chars(hosts: int) -> int:
    """The longest line (header aside) a record file of ``hosts`` hosts may hold."""
    return LINE_BASE_CHARS + LINE_HOST_CHARS * max(0, hosts)


def other_max_chars(hosts: int) -> int:
    """The characters a record file of ``hosts`` hosts may hold in all its lines other than
    probe rows (what the reader keeps as it is: hello, summary, gpu, path, truth)."""
    return OTHER_BASE_CHARS + OTHER_HOST_CHARS * max(0, hosts)


def rows_max(hosts: int, peers: Mapping[str, Any], rate: Any, duration_s: float) -> int:
    """Probe rows a file of this header may hold: two per coded pair, ``rate`` pairs a
    second to each peer for ``duration_s``, over the header's peer lists (else every
    other host), times ``ROWS_MARGIN``, plus ``ROWS_SLACK``. An unknown rate counts as
    the highest a scan may ask for (``settings.PROBE_RATE_MAX``)."""
    pairs = sum(len(v) for v in peers.values() if isinstance(v, list))
    if not peers:
        pairs = hosts * max(0, hosts - 1)
    ok = isinstance(rate, (int, float)) and not isinstance(rate, bool) and rate > 0
    per_s = min(float(rate), settings.PROBE_RATE_MAX) if ok else settings.PROBE_RATE_MAX
    sent = 2.0 * per_s * max(0.0, duration_s) * pairs
    return int(min(ROWS_MARGIN * sent, 2**62)) + ROWS_SLACK


def wide_integer(text: str) -> bool:
    """Whether ``text`` shows an integer that may be beyond int64: a run of 20 digits, or
    19 from a 9 (looked for as a run of zeros once every digit is one: a plain substring
    search, several times faster than a regular expression over a line of numbers)."""
    return "0" * 20 in text.translate(_DIGITS_AS_ZERO) or _NINE_AND_18.search(text) is not None


def check_values(
    rec: Any,
    where: str,
    text: str | None = None,
    *,
    numbers: bool = True,
    suspect: bool | None = None,
) -> None:
    """Refuse a parsed record nested deeper than ``MAX_DEPTH``, or holding an integer
    beyond int64 or a float that is not finite. With its line's ``text``, the record is
    walked only when the text shows a suspect number (``suspect``: the caller looked
    already) or more brackets than the depth allows (cheap scans of the line);
    ``numbers=False`` (probe columns, which their decoder range-checks) checks the depth
    alone."""
    if suspect is None:
        suspect = text is None or _SUSPECT_NUMBER.search(text) is not None
    walk_numbers = numbers and suspect
    if not walk_numbers and text is not None and text.count("[") + text.count("{") <= MAX_DEPTH:
        return
    if not isinstance(rec, (dict, list)):
        if walk_numbers:
            _check_number(rec, where)
        return
    # containers only go on the stack; a container's scalars are checked where they sit
    stack: list[tuple[Any, int]] = [(rec, 1)]
    while stack:
        value, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise RecordError(f"{where}: nested deeper than {MAX_DEPTH} levels")
        for v in value.values() if isinstance(value, dict) else value:
            if isinstance(v, (dict, list)):
                stack.append((v, depth + 1))
            elif walk_numbers:
                _check_number(v, where)


def _check_number(value: Any, where: str) -> None:
    if isinstance(value, bool):
        return
    if isinstance(value, int) and not I64_MIN <= value <= I64_MAX:
        raise RecordError(f"{where}: an integer beyond 64 bits ({str(value)[:24]}...)")
    if isinstance(value, float) and not math.isfinite(value):
        raise RecordError(f"{where}: a number that is not finite ({value!r})")


def printable(text: str, limit: int = 200) -> str:
    """``text`` safe to print: control characters (escape sequences, line breaks) shown
    escaped, cut to ``limit`` characters."""
    if len(text) > limit:
        text = text[:limit] + "..."
    return _CONTROL.sub(lambda m: repr(m.group())[1:-1], text)


def has_control(text: str) -> bool:
    """Whether ``text`` holds a control character (never in a name)."""
    return _CONTROL.search(text) is not None
