"""Slurm's running jobs, read from ``squeue --json``, else from its ``-o`` format.

``squeue --json`` (Slurm's openapi plugin; Debian's 22.05 has v0.0.38) gives one JSON
object per job: a job's name or comment can hold any character (a newline, ``\\x1f``,
U+2028) and still neither split a job nor forge one. Where it is missing (``read.py``
falls back on its failure) the ``-o`` format: one line per running job, fields joined
by the ASCII unit separator (``\\x1f``), the free-text fields last, every row checked
(``parse_squeue``). ``%N`` (``nodes``) is Slurm's compressed host list
(``gpu-[001-004,009]``), expanded here as ``scontrol show hostnames`` does
(``expand_hostlist``) so that one call reads every job.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Mapping

from cwctl.errors import InputError
from cwctl.jobs.model import Job, to_hosts

SEP = "\x1f"
NULL = "(null)"  # what squeue prints for an unset field
# id, user, qos, node list, comment, name
FIELDS = ("%i", "%u", "%q", "%N", "%k", "%j")
SQUEUE_ARGV = ("squeue", "--noheader", "--all", "--states=RUNNING", "-o", SEP.join(FIELDS))
SQUEUE_JSON_ARGV = ("squeue", "--json", "--all", "--states=RUNNING")
_JOB_ID = re.compile(r"^\d+(_\d+)?(\+\d+)?$")  # 4242, an array task 4242_7, a het part 4242+1
_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")
MAX_EXPANDED = 1_000_000  # names one host list may expand to (a typo'd range is refused)


def _split_top(text: str) -> list[str]:
    """``text`` split at commas outside brackets."""
    out, depth, start = [], 0, 0
    for i, c in enumerate(text):
        if c == "[":
            depth += 1
        elif c == "]":
            depth -= 1
        elif c == "," and depth == 0:
            out.append(text[start:i])
            start = i + 1
    out.append(text[start:])
    return [part for part in out if part]


def _ranges(inside: str, text: str) -> list[tuple[int, int, int]]:
    """``001-003,7`` -> ``[(1, 3, 3), (7, 7, 1)]``: (low, high, zero-padded width)."""
    out: list[tuple[int, int, int]] = []
    for part in inside.split(","):
        m = _RANGE.match(part.strip())
        if m is None:
            raise InputError(f"host list {text!r}: {part!r} is not a number or a range")
        lo, hi = m.group(1), m.group(2) or m.group(1)
        if len(lo) > 18 or len(hi) > 18 or int(hi) < int(lo):
            raise InputError(f"host list {text!r}: range {part!r} is backwards or too long")
        out.append((int(lo), int(hi), len(lo)))
    return out


def _count(ranges: list[tuple[int, int, int]]) -> int:
    return sum(hi - lo + 1 for lo, hi, _ in ranges)


def _names(ranges: list[tuple[int, int, int]]) -> list[str]:
    return [str(n).zfill(width) for lo, hi, width in ranges for n in range(lo, hi + 1)]


def expand_hostlist(text: str) -> list[str]:
    """Slurm's host list syntax expanded: ``gpu-[001-002],x[1-2]y[3]`` ->
    ``gpu-001 gpu-002 x1y3 x2y3``; ``(null)`` and ``""`` are no hosts. How many names
    it makes (every bracket's count multiplied, every token's added) is checked against
    ``MAX_EXPANDED`` before any is made: ``x[0-999][0-999][0-99]`` is refused at once."""
    text = text.strip()
    if text in ("", NULL, "None assigned"):
        return []
    tokens: list[list[list[tuple[int, int, int]] | str]] = []
    total = 0
    for token in _split_top(text):
        pieces = re.split(r"(\[[^\[\]]*\])", token)
        if any(("[" in p or "]" in p) for p in pieces if not p.startswith("[")):
            raise InputError(f"host list {text!r}: unbalanced brackets")
        parts = [_ranges(p[1:-1], text) if p.startswith("[") else p for p in pieces if p]
        count = math.prod(_count(p) for p in parts if not isinstance(p, str))
        total += count
        if total > MAX_EXPANDED:
            raise InputError(f"host list {text!r} names more than {MAX_EXPANDED} hosts")
        tokens.append(parts)
    names: list[str] = []
    for parts in tokens:
        choices = [[p] if isinstance(p, str) else _names(p) for p in parts]
        names += ["".join(combo) for combo in itertools.product(*choices)]
    return names


def parse_squeue(text: str, known: Mapping[str, str]) -> tuple[list[Job], list[str]]:
    """The jobs of ``squeue`` run with ``SQUEUE_ARGV``, and a warning per row skipped;
    ``known`` maps the names a node may have to inventory hosts (``model.to_hosts``).

    Records end at ``\\n`` only (``splitlines`` also splits at ``\\r \\v \\f \\x1c
    \\x85`` U+2028 U+2029, which a job's name may hold). A row without the fields or
    without a job id first is skipped, never the whole read; a job id on two rows (a name
    holding a newline and a forged row) drops both: neither can be told true. A job name
    can still forge a row for an id of its own making: ``squeue --json``
    (``parse_squeue_json``) is read first where Slurm has it."""
    rows: dict[str, list[tuple[int, list[str]]]] = {}
    warnings: list[str] = []
    for n, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        parts = line.split(SEP)
        if len(parts) < len(FIELDS) or not _JOB_ID.match(parts[0].strip()):
            warnings.append(f"squeue line {n} skipped: not a job's row: {line[:80]!r}")
            continue
        rows.setdefault(parts[0].strip(), []).append((n, parts))
    jobs = []
    for job_id, found in rows.items():
        if len(found) > 1:
            at = ", ".join(str(n) for n, _ in found)
            warnings.append(f"squeue lines {at} skipped: job {job_id} on {len(found)} rows")
            continue
        n, parts = found[0]
        user, qos, nodelist, comment = (p.strip() for p in parts[1:5])
        name = SEP.join(parts[5:]).strip()
        job = _job(job_id, user, qos, nodelist, comment, name, known, f"squeue line {n}")
        if isinstance(job, str):
            warnings.append(job)
        else:
            jobs.append(job)
    return jobs, warnings


def parse_squeue_json(text: str, known: Mapping[str, str]) -> tuple[list[Job], list[str]]:
    """The running jobs of ``squeue --json`` (``SQUEUE_JSON_ARGV``; Slurm's openapi
    plugin, 22.05 and later): one JSON object per job, so no text a job holds can split
    or forge one. A job whose fields are not of their type is skipped with a warning.
    Raises ``InputError`` when the text is not squeue's JSON at all."""
    import json

    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise InputError(f"squeue --json: not JSON ({exc})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("jobs"), list):
        raise InputError("squeue --json: no 'jobs' list in its output")
    jobs, warnings = [], []
    for i, j in enumerate(doc["jobs"]):
        where = f"squeue --json job #{i}"
        if not isinstance(j, dict) or j.get("job_state") not in ("RUNNING", ["RUNNING"]):
            if not isinstance(j, dict):
                warnings.append(f"{where} skipped: not an object")
            continue
        job_id, task = j.get("job_id"), j.get("array_task_id")
        if isinstance(task, int) and not isinstance(task, bool) and j.get("array_job_id"):
            job_id = f"{j['array_job_id']}_{task}"
        comment = j.get("comment") or ""
        if isinstance(comment, dict):  # the openapi plugins after 0.0.38: one per author
            comment = comment.get("job") or ""
        fields = [j.get("user_name"), j.get("qos") or "", j.get("nodes"), comment, j.get("name")]
        if not isinstance(job_id, int | str) or not all(isinstance(f, str) for f in fields):
            warnings.append(f"{where} skipped: a field of the wrong type")
            continue
        user, qos, nodelist, comment, name = (str(f) for f in fields)
        job = _job(str(job_id), user, qos, nodelist, comment, name, known, where)
        if isinstance(job, str):
            warnings.append(job)
        else:
            jobs.append(job)
    return jobs, warnings


def _job(
    job_id: str,
    user: str,
    qos: str,
    nodelist: str,
    comment: str,
    name: str,
    known: Mapping[str, str],
    where: str,
) -> Job | str:
    """The job, or why it is skipped (its node list does not expand)."""
    try:
        nodes = tuple(expand_hostlist(nodelist))
    except InputError as exc:
        return f"{where} skipped: {exc}"
    marks = {k: v for k, v in (("qos", qos), ("comment", comment)) if v and v != NULL}
    return Job(job_id, user, name, nodes, to_hosts(nodes, known), marks)
