"""Which jobs a suspect hurts, and which jobs an action touches.

A job hurts when traffic between two of its nodes crosses the suspect (its collectives:
all-reduce, all-to-all), or when the suspect sits on one of its nodes (the host, one of
its NICs, its access link): it loses that node's share, or the node. Pairs are counted
unordered, among the job's nodes the fabric knows (``Job.hosts``): ``paths`` is how many
there are, ``paths_hit`` how many cross the suspect: a probed pair by its measured path
(its discovered route, or one of the equal-cost routes of a path nobody discovered); a
pair nobody probed by its leaves, when a probed pair between the same two leaves crossed
it (its likely path). A job whose nodes all sit behind one leaf crosses no spine link.
For a suspect on a host (the host, a NIC, its access link) the pairs with an end there.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from cwctl.jobs.model import Job, JobMap, JobRead
from cwctl.scan.snapshot import Crossings, FabricSnapshot, Suspect


def sits_on(element: str, hosts: Iterable[str], leaf_of: Mapping[str, str | None]) -> str | None:
    """The host an element sits on: the host itself, ``HOST/NIC``, or the access link
    ``HOST-LEAF``; None for a switch or a leaf-spine link."""
    known = set(hosts)
    if element in known:
        return element
    host, slash, _ = element.partition("/")
    if slash and host in known:
        return host
    for cut in [i for i, c in enumerate(element) if c == "-"]:
        host, leaf = element[:cut], element[cut + 1 :]
        if host in known and leaf_of.get(host) == leaf:
            return host
    return None


def _pair_count(counts: Mapping[str, int], leaf_pairs: set[tuple[str, str]]) -> int:
    """Pairs of a job's nodes (``counts``: how many behind each leaf) between two leaves
    that ``leaf_pairs`` holds (sorted pairs; a leaf with itself: pairs inside it)."""
    total = 0
    leaves = sorted(counts)
    for i, a in enumerate(leaves):
        for b in leaves[i:]:
            if (a, b) in leaf_pairs:
                na, nb = counts[a], counts[b]
                total += na * (na - 1) // 2 if a == b else na * nb
    return total


class _Reach:
    """One suspect's crossings, arranged for counting each job's pairs: the probed pairs
    that crossed it, and which probed pairs join two leaves a crossing pair joined."""

    def __init__(self, crossings: Crossings, element: str) -> None:
        self.crossings = crossings
        self.index = {h: i for i, h in enumerate(crossings.hosts)}
        empty = np.zeros(0, np.int64)
        self.lo, self.hi = crossings.hit.get(element, (empty, empty))
        self.leaf_pairs = crossings.leaf_pairs.get(element, set())
        names = sorted({leaf for leaf in crossings.leaves if leaf is not None})
        code = {leaf: i for i, leaf in enumerate(names)}
        leaf = np.array([code.get(x, -1) if x else -1 for x in crossings.leaves], np.int64)
        plo, phi = crossings.probed
        a, b = np.minimum(leaf[plo], leaf[phi]), np.maximum(leaf[plo], leaf[phi])
        wanted = {(code[x], code[y]) for x, y in self.leaf_pairs if x in code and y in code}
        n = len(names) + 1
        marked_codes = np.array([x * n + y for x, y in wanted], np.int64)
        self.marked = (a >= 0) & np.isin(a * n + b, marked_codes)  # per probed pair

    def paths_hit(self, job: Job) -> int:
        c = self.crossings
        members = [self.index[h] for h in job.hosts if h in self.index]
        if len(job.hosts) < 2 or not members:
            return 0
        inside = np.zeros(len(c.hosts), bool)
        inside[members] = True
        measured = int(np.count_nonzero(inside[self.lo] & inside[self.hi]))
        if not self.leaf_pairs:
            return measured
        # pairs nobody probed, between leaves a probed pair crossed it from: likely
        counts: Counter[str] = Counter(x for i in members if (x := c.leaves[i]) is not None)
        plo, phi = c.probed
        probed_there = int(np.count_nonzero(inside[plo] & inside[phi] & self.marked))
        return measured + _pair_count(counts, self.leaf_pairs) - probed_there


def hurt(
    suspect: Suspect, jobs: JobMap, crossings: Crossings | None, leaf_of: Mapping[str, str | None]
) -> list[dict[str, Any]]:
    """The jobs ``suspect`` hurts, most paths hit first: each ``Job.summary()`` with
    ``paths_hit`` and ``paths`` (and ``on_node`` when it sits on one of the job's nodes)."""
    known = set(leaf_of) | {h for job in jobs.jobs for h in job.hosts}
    sits = [sits_on(m, known, leaf_of) for m in suspect.members]
    on = {h for h in sits if h is not None}
    # a host, its NIC or access link: a pair crosses it when one of its ends is there (a
    # pair elsewhere between the same leaves does not: no inference by leaves)
    hosted = all(h is not None for h in sits)
    reach = _Reach(crossings, suspect.element) if crossings is not None and not hosted else None
    out = []
    for job in jobs.jobs:
        node = on.intersection(job.hosts)
        if hosted:
            k, n = len(node), len(job.hosts)
            hit = k * (n - k) + k * (k - 1) // 2
        else:
            hit = reach.paths_hit(job) if reach is not None else 0
        if not hit and not node:
            continue
        n = len(job.hosts)
        entry = {**job.summary(), "paths_hit": hit, "paths": n * (n - 1) // 2}
        if node:
            entry["on_node"] = sorted(node)
        out.append(entry)
    out.sort(key=lambda e: (-e["paths_hit"], -len(e.get("on_node", ())), e["id"]))
    return out


def attach(snapshot: FabricSnapshot, read: JobRead | None) -> FabricSnapshot:
    """Each suspect of ``snapshot`` with the jobs it hurts; the snapshot's ``jobs`` says
    what was read. Without a read (no scheduler) the snapshot is left as it was."""
    if read is None:
        return snapshot
    snapshot.jobs = read.to_json()
    jobs = read.map
    for h in snapshot.hosts:
        h.jobs = [j.id for j in jobs.on(h.name)]
    leaf_of = {h.name: h.leaf for h in snapshot.hosts}
    for s in snapshot.suspects:
        s.jobs = hurt(s, jobs, snapshot.crossings, leaf_of)
    return snapshot


# --- what an action touches ----------------------------------------------------------


def loses_node(jobs: JobMap, host: str) -> list[tuple[Job, str]]:
    """Draining ``host``: the jobs that lose a node (the whole job stops at its next
    collective, or is requeued, as its scheduler and launcher decide)."""
    return [(job, f"loses node {host}") for job in jobs.on(host)]


def flows_move(
    jobs: JobMap,
    *,
    leaves: Sequence[str],
    spine: str,
    leaf_of: Mapping[str, str | None],
    what: str,
) -> list[tuple[Job, str]]:
    """Steering traffic of ``leaves`` off ``spine``: the jobs with nodes behind one of
    ``leaves`` and nodes behind another leaf (their flows through ``spine`` move to the
    other spines, for the run of the job; a job inside one leaf crosses no spine)."""
    wanted = set(leaves)
    out = []
    for job in jobs.jobs:
        spans = {leaf_of.get(h) for h in job.hosts} - {None}
        if len(spans) > 1 and spans & wanted:
            out.append((job, f"flows through {spine} move ({what})"))
    return out


def flows_steered(
    jobs: JobMap, pairs: Iterable[tuple[str, str]], suspect: str
) -> list[tuple[Job, str]]:
    """Host-side steering of ``pairs`` (sender, peer) off ``suspect``: the jobs with both
    ends of a steered pair (their new connections between those nodes leave from other
    source ports; connections already open keep their path)."""
    steered = {(a, b) for a, b in pairs}
    out = []
    for job in jobs.jobs:
        mine = set(job.hosts)
        n = sum(1 for a, b in steered if a in mine and b in mine)
        if n:
            out.append(
                (job, f"new connections of {n} of its host pairs leave by ports that avoid "
                      f"{suspect} (open ones keep their path)")
            )  # fmt: skip
    return out


def uses_nic(jobs: JobMap, host: str, nic: str) -> list[tuple[Job, str]]:
    """Excluding ``nic`` on ``host``: the jobs running there. NCCL reads its NIC list
    when a communicator is made: a running job keeps the NIC until it restarts."""
    return [
        (job, f"on {host}: new communicators leave {nic} out (a running job keeps it "
              "until it restarts)")
        for job in jobs.on(host)
    ]  # fmt: skip


def protected(marks: Mapping[str, str], rules: Iterable[str]) -> str | None:
    """The first of ``rules`` (``comment=protected``, ``qos=high``,
    ``label:team=infra``; a bare key matches any value) a job's ``marks`` meet."""
    for rule in rules:
        key, eq, value = rule.partition("=")
        have = marks.get(key.strip())
        if have is not None and (not eq or have == value.strip()):
            return rule
    return None


def protected_in(touched: Iterable[Mapping[str, Any]], rules: Sequence[str]) -> list[str]:
    """``ID (RULE)`` for each job of a plan's ``jobs`` (``touched_json``) that a rule of
    ``rules`` protects."""
    out = []
    for entry in touched:
        rule = protected(entry.get("marks") or {}, rules)
        if rule is not None:
            out.append(f"{entry.get('id')} ({rule})")
    return out


def touched_json(touched: Iterable[tuple[Job, str]]) -> list[dict[str, Any]]:
    """What a plan carries (and the journal keeps): each job's summary, how the plan
    touches it, and its marks (for a policy that protects jobs)."""
    return [{**job.summary(), "how": how, "marks": dict(job.marks)} for job, how in touched]
