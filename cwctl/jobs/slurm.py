"""Slurm's running jobs, read from ``squeue``'s stable ``-o`` format.

Debian's Slurm 22.05 has ``squeue --json`` only through its openapi plugins, whose
output changes with the plugin version; the ``-o`` format has been stable for a decade.
One line per running job, fields joined by the ASCII unit separator (``\\x1f``), which a
job's name or comment cannot hold from ``sbatch``'s command line; the free-text fields
last. ``%N`` is Slurm's compressed host list (``gpu-[001-004,009]``), expanded here as
``scontrol show hostnames`` does (``expand_hostlist``) so that one call reads every job.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping

from cwctl.errors import InputError
from cwctl.jobs.model import Job, to_hosts

SEP = "\x1f"
NULL = "(null)"  # what squeue prints for an unset field
# id, user, qos, node list, comment, name
FIELDS = ("%i", "%u", "%q", "%N", "%k", "%j")
SQUEUE_ARGV = ("squeue", "--noheader", "--all", "--states=RUNNING", "-o", SEP.join(FIELDS))
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


def _ranges(inside: str, text: str) -> list[str]:
    """``001-003,7`` -> ``['001', '002', '003', '7']`` (zero padding kept)."""
    out: list[str] = []
    for part in inside.split(","):
        m = _RANGE.match(part.strip())
        if m is None:
            raise InputError(f"host list {text!r}: {part!r} is not a number or a range")
        lo, hi = m.group(1), m.group(2) or m.group(1)
        if int(hi) < int(lo) or len(out) + int(hi) - int(lo) >= MAX_EXPANDED:
            raise InputError(f"host list {text!r}: range {part!r} is backwards or too long")
        out += [str(n).zfill(len(lo)) for n in range(int(lo), int(hi) + 1)]
    return out


def expand_hostlist(text: str) -> list[str]:
    """Slurm's host list syntax expanded: ``gpu-[001-002],x[1-2]y[3]`` ->
    ``gpu-001 gpu-002 x1y3 x2y3``; ``(null)`` and ``""`` are no hosts."""
    text = text.strip()
    if text in ("", NULL, "None assigned"):
        return []
    names: list[str] = []
    for token in _split_top(text):
        pieces = re.split(r"(\[[^\[\]]*\])", token)
        if any(("[" in p or "]" in p) for p in pieces if not p.startswith("[")):
            raise InputError(f"host list {text!r}: unbalanced brackets")
        choices = [_ranges(p[1:-1], text) if p.startswith("[") else [p] for p in pieces if p]
        names += ["".join(combo) for combo in itertools.product(*choices)]
        if len(names) > MAX_EXPANDED:
            raise InputError(f"host list {text!r} names more than {MAX_EXPANDED} hosts")
    return names


def parse_squeue(text: str, known: Mapping[str, str]) -> list[Job]:
    """The jobs of ``squeue`` run with ``SQUEUE_ARGV``; ``known`` maps the names a node
    may have to inventory hosts (``model.to_hosts``). A line that does not have the
    fields is an error naming it (a squeue that ignored the format)."""
    jobs = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        parts = line.split(SEP)
        if len(parts) < len(FIELDS):
            raise InputError(
                f"squeue line {n} has {len(parts)} of {len(FIELDS)} fields: {line[:120]!r}"
            )
        job_id, user, qos, nodelist, comment = (p.strip() for p in parts[:5])
        name = SEP.join(parts[5:]).strip()
        nodes = tuple(expand_hostlist(nodelist))
        marks = {k: v for k, v in (("qos", qos), ("comment", comment)) if v and v != NULL}
        jobs.append(Job(job_id, user, name, nodes, to_hosts(nodes, known), marks))
    return jobs
