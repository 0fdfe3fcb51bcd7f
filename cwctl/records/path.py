"""Path records (``type: "path"``): the hops a flow took, as discovered, and their table.

One JSON line per discovered 5-tuple, written by the host that sent the tracing
packets (docs/records.md, "Path records")::

    {"type": "path", "v": 1, "host": "gpu-001", "peer": "gpu-005", "role": "probe",
     "nic": "eth1", "src": "10.1.1.2", "sport": 40001, "dst": "10.1.2.3", "dport": 50000,
     "proto": "udp", "hops": ["10.0.1.1", null, "10.0.9.3"], "complete": true,
     "t_ns": 1700000000000000000, "cached": false}

``role`` says which tuple was traced: ``probe`` the prober's probe tuple (the forward
path of the probes ``host`` sent ``peer`` from ``sport``), ``reply`` the answerer's
reply tuple (the reverse path of the probes ``peer`` sent ``host`` from ``dport``).
``hops[i]`` is the address that answered TTL ``i + 1``; ``null`` is no answer (silent,
rate-limited, lost): never a guess. ``complete`` is true when the destination answered
right after the last hop. ``nic`` (optional) names the NIC the packets left from.

``PathTable`` keeps the newest record per traced tuple and answers the localiser's two
questions: the forward and the reverse path of a probe flow (prober, answerer, source
port). Turning hop addresses into switch names is the inventory's job
(``Topology.switch_of_address``); ``hop_switches`` does it for one record.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Final, Literal

from cwctl.errors import RecordError
from cwctl.runtime.gcpause import paused_gc

PATH_RECORD_VERSION: Final = 1
PATH_ROLES: Final = ("probe", "reply")
PATH_PROTOS: Final = ("udp",)
MAX_HOPS: Final = 64  # TTLs a record may hold; a leaf-spine path is 3 switches long
_MAX_NS: Final = 2**62

Role = Literal["probe", "reply"]


def _where_key(where: str, key: str, message: str) -> RecordError:
    return RecordError(f"{where}: path key {key!r} {message}")


@lru_cache(maxsize=1 << 16)
def _spaced(value: str) -> bool:
    """Whether a name holds white space (asked once per distinct name: a file's hosts)."""
    return any(ch.isspace() for ch in value)


def _name(rec: Mapping[str, Any], key: str, where: str) -> str:
    value = rec.get(key)
    if not isinstance(value, str) or not value or _spaced(value):
        raise _where_key(where, key, f"must be a non-empty name, got {value!r}")
    return value


@lru_cache(maxsize=1 << 16)
def _canonical(value: str) -> str | None:
    """An address's canonical text, None if it is none (parsed once per distinct text: a
    fleet's hops are a few thousand addresses over hundreds of thousands of records)."""
    try:
        return str(ipaddress.ip_address(value))
    except ValueError:
        return None


def _address(value: Any, key: str, where: str) -> str:
    """An IP address in canonical text (what the inventory's address maps hold)."""
    if isinstance(value, str) and len(value) <= 64:
        canonical = _canonical(value)
        if canonical is not None:
            return canonical
    raise _where_key(where, key, f"must be an IP address, got {value!r}")


def _port(rec: Mapping[str, Any], key: str, where: str) -> int:
    value = rec.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 65535:
        raise _where_key(where, key, f"must be a port in [1, 65535], got {value!r}")
    return value


def _flag(rec: Mapping[str, Any], key: str, where: str) -> bool:
    value = rec.get(key)
    if not isinstance(value, bool):
        raise _where_key(where, key, f"must be true or false, got {value!r}")
    return value


@dataclass(frozen=True, slots=True)
class PathRecord:
    """One decoded ``path`` record; ``hops`` per TTL from 1, None where nobody answered."""

    host: str
    peer: str
    role: Role
    src: str
    sport: int
    dst: str
    dport: int
    hops: tuple[str | None, ...]
    complete: bool
    t_ns: int
    cached: bool = False
    nic: str | None = None
    proto: str = "udp"

    @property
    def flow_port(self) -> int:
        """The probe flow's source port: ``sport`` of a probe trace, ``dport`` of a reply."""
        return self.sport if self.role == "probe" else self.dport

    @property
    def known(self) -> int:
        """How many hops answered."""
        return len(self.hops) - self.hops.count(None)

    def as_cached(self) -> PathRecord:
        """This record standing in for a path not traced again (``cached``)."""
        return PathRecord(
            self.host, self.peer, self.role, self.src, self.sport, self.dst, self.dport,
            self.hops, self.complete, self.t_ns, True, self.nic, self.proto,
        )  # fmt: skip

    def to_json(self) -> dict[str, Any]:
        rec: dict[str, Any] = {
            "type": "path",
            "v": PATH_RECORD_VERSION,
            "host": self.host,
            "peer": self.peer,
            "role": self.role,
        }
        if self.nic is not None:
            rec["nic"] = self.nic
        rec.update(
            src=self.src,
            sport=self.sport,
            dst=self.dst,
            dport=self.dport,
            proto=self.proto,
            hops=list(self.hops),
            complete=self.complete,
            t_ns=self.t_ns,
            cached=self.cached,
        )
        return rec


def decode_path(rec: Mapping[str, Any], *, where: str = "record") -> PathRecord:
    """Validate a ``path`` record (parsed from JSON); raise a one-line ``RecordError``."""
    version = rec.get("v")
    if version != PATH_RECORD_VERSION or isinstance(version, bool):
        raise RecordError(f"{where}: unsupported path record version {version!r}")
    host, peer = _name(rec, "host", where), _name(rec, "peer", where)
    if host == peer:
        raise RecordError(f"{where}: path from {host!r} to itself")
    role = rec.get("role")
    if not isinstance(role, str) or role not in PATH_ROLES:
        raise _where_key(where, "role", f"must be one of {', '.join(PATH_ROLES)}, got {role!r}")
    proto = rec.get("proto")
    if not isinstance(proto, str) or proto not in PATH_PROTOS:
        raise _where_key(where, "proto", f"must be one of {', '.join(PATH_PROTOS)}, got {proto!r}")
    nic = rec.get("nic")
    if nic is not None:
        nic = _name(rec, "nic", where)
    hops = rec.get("hops")
    if not isinstance(hops, list) or len(hops) > MAX_HOPS:
        shown = f"{len(hops)} hops" if isinstance(hops, list) else repr(hops)
        raise _where_key(where, "hops", f"must be a list of at most {MAX_HOPS}, got {shown}")
    decoded = tuple(
        None if hop is None else _address(hop, f"hops[{i}]", where) for i, hop in enumerate(hops)
    )
    t_ns = rec.get("t_ns")
    if isinstance(t_ns, bool) or not isinstance(t_ns, int) or not 1 <= t_ns <= _MAX_NS:
        raise _where_key(where, "t_ns", f"must be an integer in [1, {_MAX_NS}], got {t_ns!r}")
    src = _address(rec.get("src"), "src", where)
    dst = _address(rec.get("dst"), "dst", where)
    if src == dst:
        raise RecordError(f"{where}: path from {src} to itself")
    return PathRecord(
        host=host,
        peer=peer,
        role=role,  # type: ignore[arg-type]
        src=src,
        sport=_port(rec, "sport", where),
        dst=dst,
        dport=_port(rec, "dport", where),
        hops=decoded,
        complete=_flag(rec, "complete", where),
        t_ns=t_ns,
        cached=_flag(rec, "cached", where),
        nic=nic,
        proto=proto,
    )


def hop_switches(path: PathRecord, switch_of_address: Mapping[str, str]) -> list[str | None]:
    """Each hop as the switch that owns its address; None where silent or not a switch."""
    return [None if hop is None else switch_of_address.get(hop) for hop in path.hops]


# (prober, answerer, probe source port): a probe flow, as a ProbeTable row names it
FlowKey = tuple[str, str, int]
# (tracing host, peer, role, the probe flow's source port): a traced tuple, less the NIC
TupleKey = tuple[str, str, Role, int]


@dataclass
class PathTable:
    """The discovered paths of a scan: the newest record per traced tuple.

    ``forward(p, q, s)`` is the path of the probes ``p`` sent ``q`` from source port
    ``s`` (traced by ``p``, role ``probe``); ``reverse(p, q, s)`` the path of ``q``'s
    replies to them (traced by ``q``, role ``reply``, ``dport == s``). With several
    NICs, ``nic`` picks the tracing host's (the prober's forward, the answerer's in
    reverse); without it, the path traced without a NIC name, else any NIC's.
    """

    # per (host, peer, role, flow port): the record, or per NIC its record where
    # records of several NICs share the tuple (a dict per tuple would be 184 bytes more
    # each: a million tuples at 10 000 hosts)
    _by_key: dict[TupleKey, PathRecord | dict[str | None, PathRecord]] = field(default_factory=dict)

    @classmethod
    def of(cls, paths: Iterable[PathRecord]) -> PathTable:
        """The table of ``paths``: ``add`` each, in order (where no tuple comes twice,
        one dict built at once: a simulated window's half a million)."""
        table = cls()
        with paused_gc():  # records and tuples, no cycles: a million at scale
            paths = list(paths)
            keys = [(p.host, p.peer, p.role, p.flow_port) for p in paths]
            table._by_key = dict(zip(keys, paths, strict=True))
            if len(table._by_key) < len(paths):  # tuples traced twice: the newest of each
                table._by_key = {}
                for path in paths:
                    table.add(path)
        return table

    def add(self, path: PathRecord) -> None:
        """Keep ``path`` unless a record of the same tuple is newer."""
        key = (path.host, path.peer, path.role, path.flow_port)
        entry = self._by_key.get(key)
        if entry is None:
            self._by_key[key] = path
            return
        old = entry.get(path.nic) if isinstance(entry, dict) else entry
        if (
            old is not None
            and old.nic == path.nic
            and (old.t_ns, old.known) > (path.t_ns, path.known)
        ):
            return
        self._put(key, entry, path)

    def replace(self, path: PathRecord) -> None:
        """Put ``path`` in place of any record of the same tuple, older or not."""
        key = (path.host, path.peer, path.role, path.flow_port)
        self._put(key, self._by_key.get(key), path)

    def _put(
        self,
        key: TupleKey,
        entry: PathRecord | dict[str | None, PathRecord] | None,
        path: PathRecord,
    ) -> None:
        if entry is None or (isinstance(entry, PathRecord) and entry.nic == path.nic):
            self._by_key[key] = path
        elif isinstance(entry, PathRecord):
            self._by_key[key] = {entry.nic: entry, path.nic: path}
        else:
            entry[path.nic] = path

    def __len__(self) -> int:
        return sum(len(v) if isinstance(v, dict) else 1 for v in self._by_key.values())

    def __iter__(self) -> Iterator[PathRecord]:
        for entry in self._by_key.values():
            if isinstance(entry, dict):
                yield from entry.values()
            else:
                yield entry

    def _get(self, key: TupleKey, nic: str | None) -> PathRecord | None:
        entry = self._by_key.get(key)
        if entry is None:
            return None
        if not isinstance(entry, dict):
            # the one record: asked for its NIC, for none, or it names none
            return entry if nic in (entry.nic, None) or entry.nic is None else None
        if nic in entry:
            return entry[nic]
        if nic is None or None in entry:
            return entry.get(None) or next(iter(entry.values()))
        return None

    def forward(
        self, prober: str, answerer: str, sport: int, nic: str | None = None
    ) -> PathRecord | None:
        return self._get((prober, answerer, "probe", sport), nic)

    def reverse(
        self, prober: str, answerer: str, sport: int, nic: str | None = None
    ) -> PathRecord | None:
        """The replies' path; ``nic`` is the answerer's NIC (where the replies left from)."""
        return self._get((answerer, prober, "reply", sport), nic)

    def flows(self) -> set[FlowKey]:
        """Every probe flow with at least one discovered direction."""
        return {
            (h, p, port) if role == "probe" else (p, h, port) for (h, p, role, port) in self._by_key
        }
