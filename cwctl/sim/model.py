"""The simulated fabric as one mutable object: build it, probe it, change it, probe again.

``FabricModel`` holds what a seed fixes (topology, clocks, cables, faults, the peer
assignment) and what actions change (``ModelState``: ECMP weights per leaf and spine,
excluded NICs, drained hosts). ``probe(duration_s)`` runs one probing window and
returns its ``ProbeTable`` and ``truth``; windows follow each other in time, so a
rescan of the same model sees the clocks drift on, faults that start at ``@T``
appear, and every change applied in between.

Changes (``apply``): ``SetEcmpWeight(spine, weight, leaf=None)`` (WCMP: a leaf's ECMP
group lists each spine ``weight`` times, so weight 0 takes a spine out),
``ExcludeNic("gpu-001/mlx5_1")`` / ``IncludeNic`` (probes and traffic leave by the
host's other NICs), ``DrainHost("gpu-003")`` / ``ResumeHost`` (the host carries no
job traffic: its access links go quiet and a ``congested`` fault of the host is moot).
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from cwctl import settings
from cwctl.errors import InputError
from cwctl.fabric.topology import Topology, assign_peers, leaf_spine
from cwctl.records.path import PathRecord
from cwctl.runtime.arrays import I64
from cwctl.runtime.gcpause import paused_gc
from cwctl.sim.addresses import SimAddresses, sim_addresses
from cwctl.sim.clocks import Clocks
from cwctl.sim.delays import FixedDelays, draw_fixed
from cwctl.sim.ecmp import ECMP_MODES, switch_seeds
from cwctl.sim.fabric import Fabric, build_fabric
from cwctl.sim.faults import Fault, parse_fault
from cwctl.sim.params import SimParams
from cwctl.sim.window import flow_paths, simulate_window
from cwctl.sim.world import ModelState, ProbeWindow

PATH_CACHE_S = 600.0  # a known path is traced again after this long (docs/paths.md)


@dataclass(frozen=True)
class SetEcmpWeight:
    """Weight of ``spine`` in the ECMP group of ``leaf`` (every leaf when None); 0 removes it."""

    spine: str
    weight: int
    leaf: str | None = None


@dataclass(frozen=True)
class ExcludeNic:
    nic: str  # "host/nic"


@dataclass(frozen=True)
class IncludeNic:
    nic: str


@dataclass(frozen=True)
class DrainHost:
    host: str


@dataclass(frozen=True)
class ResumeHost:
    host: str


@dataclass(frozen=True)
class SteerPairs:
    """The flows between each pair of hosts leave from source ports whose paths avoid
    ``spine`` (``spine`` None: steered no more)."""

    pairs: tuple[tuple[str, str], ...]
    spine: str | None


Change = SetEcmpWeight | ExcludeNic | IncludeNic | DrainHost | ResumeHost | SteerPairs


class FabricModel:
    """A seeded simulated fabric (see the module docstring)."""

    def __init__(
        self,
        hosts: Sequence[str],
        topology: Topology | None,
        *,
        params: SimParams | None = None,
        seed: int = settings.SIM_SEED,
        faults: Iterable[str | Fault] = (),
        nics: Mapping[str, Sequence[str]] | None = None,
    ) -> None:
        self.params = params or SimParams()
        if self.params.timestamps not in ("hw", "sw"):
            raise InputError(f"--timestamps must be hw or sw, got {self.params.timestamps!r}")
        if not 0.0 <= self.params.load <= 1.0:
            raise InputError(f"--load must be in 0..1, got {self.params.load}")
        if self.params.rate <= 0 or self.params.ports < 1 or self.params.peers < 0:
            raise InputError("probe rate must be > 0, ports >= 1 and peers >= 0")
        if self.params.ecmp not in ECMP_MODES:
            raise InputError(
                f"--ecmp must be one of {', '.join(ECMP_MODES)}, got {self.params.ecmp!r}"
            )
        if len(set(hosts)) < 2:
            raise InputError("a simulated fabric needs at least 2 hosts")
        self.seed = seed
        self.fabric: Fabric = build_fabric(hosts, topology, nics)
        self.topology = topology
        parsed = [f if isinstance(f, Fault) else parse_fault(f) for f in faults]
        self.faults: list[tuple[Fault, int]] = [(f, self.fabric.element(f)) for f in parsed]
        for f in parsed:
            if f.mode == "silent" and f.kind != "switch":
                raise InputError(f"--fault {f.text or f.spec!r}: only a switch can be silent")
        self.addresses: SimAddresses = sim_addresses(self.fabric)
        # each switch's secret ECMP seed (leaves, then spines): never leaves cwctl.sim
        self.switch_seeds = switch_seeds(seed, self.fabric.n_leaves + self.fabric.n_spines)
        root = np.random.SeedSequence(seed)
        clock_seq, fixed_seq, self._window_seq = root.spawn(3)
        self.clocks = Clocks(self.fabric.n_hosts, self.params, clock_seq)
        self.fixed: FixedDelays = draw_fixed(
            self.fabric, self.params, np.random.default_rng(fixed_seq)
        )
        leaf_of = dict(topology.leaf_of) if topology is not None else None
        self.peers: dict[str, list[str]] = assign_peers(
            self.fabric.hosts, self.params.peers, seed=seed, leaf_of=leaf_of
        )
        self.state = ModelState()
        self.host_addresses: dict[str, str] = {}  # host -> address, when an inventory gave them
        # a scan's window unless told: the budget's, or the inventory's [probe] duration
        self.default_duration_s = settings.PROBE_DURATION_S
        self.inventory_probe: Any = None  # the inventory's [probe] settings, when one gave them
        self.elapsed_s = 0.0  # where the next window starts, seconds after the origin
        self.windows = 0
        # what the agents discovered, by traced tuple (tracing NIC, peer, role, port)
        self.path_cache: dict[int, PathRecord] = {}  # by discovery.trace_keys

    @classmethod
    def leaf_spine(
        cls,
        hosts: int = settings.SIM_HOSTS,
        hosts_per_leaf: int = settings.SIM_HOSTS_PER_LEAF,
        spines: int = settings.SIM_SPINES,
        **kwargs: Any,
    ) -> FabricModel:
        """The default fabric shape (``gpu-001``…, ``leaf1``…, ``spine1``…)."""
        if hosts < 2 or hosts_per_leaf < 1 or spines < 1:
            raise InputError("--hosts must be >= 2, --hosts-per-leaf and --spines >= 1")
        names, topology = leaf_spine(hosts, hosts_per_leaf, spines)
        return cls(names, topology, **kwargs)

    # --- actions --------------------------------------------------------------------
    def apply(self, *changes: Change) -> None:
        """Change the model; later windows see the change. ``InputError`` on unknown names."""
        fabric = self.fabric
        if changes:
            self.path_cache.clear()  # after an action every path is traced afresh
        for change in changes:
            if isinstance(change, SetEcmpWeight):
                if change.spine not in fabric.spines:
                    raise InputError(f"no spine named {change.spine!r} in the simulated fabric")
                if change.leaf is not None and change.leaf not in fabric.leaves:
                    raise InputError(f"no leaf named {change.leaf!r} in the simulated fabric")
                if change.weight < 0:
                    raise InputError(f"an ECMP weight must be >= 0, got {change.weight}")
                leaves = [change.leaf] if change.leaf is not None else fabric.leaves
                for leaf in leaves:
                    self.state.ecmp_weight[(leaf, change.spine)] = int(change.weight)
            elif isinstance(change, ExcludeNic | IncludeNic):
                if not fabric.has("nic", change.nic):
                    raise InputError(f"no NIC named {change.nic!r} in the simulated fabric")
                if isinstance(change, ExcludeNic):
                    self.state.excluded_nics.add(change.nic)
                else:
                    self.state.excluded_nics.discard(change.nic)
            elif isinstance(change, DrainHost | ResumeHost):
                if change.host not in fabric.hosts:
                    raise InputError(f"no host named {change.host!r} in the simulated fabric")
                if isinstance(change, DrainHost):
                    self.state.drained_hosts.add(change.host)
                else:
                    self.state.drained_hosts.discard(change.host)
            elif isinstance(change, SteerPairs):
                self._steer(change)
            else:  # pragma: no cover - the type says it cannot happen
                raise TypeError(f"not a model change: {change!r}")

    def _steer(self, change: SteerPairs) -> None:
        fabric = self.fabric
        if change.spine is not None and change.spine not in fabric.spines:
            raise InputError(f"no spine named {change.spine!r} in the simulated fabric")
        for a, b in change.pairs:
            for host in (a, b):
                if host not in fabric.hosts:
                    raise InputError(f"no host named {host!r} in the simulated fabric")
            key = (min(a, b), max(a, b))
            if change.spine is None:
                self.state.steered.pop(key, None)
            else:
                self.state.steered[key] = change.spine

    def snapshot_state(self) -> ModelState:
        """A copy of the current state (to restore with ``restore_state``)."""
        return copy.deepcopy(self.state)

    def restore_state(self, state: ModelState) -> None:
        self.state = copy.deepcopy(state)

    def published_topology(self) -> Topology | None:
        """The topology as an inventory would describe this fabric: with every switch's
        fabric addresses and every NIC's probe address (never the ECMP hash or seeds)."""
        if self.topology is None:
            return None
        fabric = self.fabric
        switches = self.addresses.switch_addresses(fabric)
        nics = self.addresses.host_addresses(fabric)
        return dataclasses.replace(
            self.topology,
            switch_of_address={a: name for name, addrs in switches.items() for a in addrs},
            host_of_address={
                a: (host, fabric.nics[h][j] if len(fabric.nics[h]) > 1 else None)
                for h, host in enumerate(fabric.hosts)
                for j, a in enumerate(nics[host])
            },
        )

    # --- paths ----------------------------------------------------------------------
    def path(self, src: str, dst: str, sport: int) -> dict[str, Any]:
        """Where the probes of one flow go now: elements crossed each way, base delays (ns).

        The base delay is cables + switches + fixed asymmetry: a probe's one-way delay
        without queueing, faults or timestamp noise.
        """

        hosts = self.fabric.hosts
        for name in (src, dst):
            if name not in hosts:
                raise InputError(f"no host named {name!r} in the simulated fabric")
        port = np.array([sport - self.params.base_port], np.int64)
        if not 0 <= port[0] < self.params.ports:
            raise InputError(f"source port {sport} is not one the simulated agents use")
        p = flow_paths(self.model_index([src]), self.model_index([dst]), port, model=self)
        names = self.fabric.names
        return {
            "fwd": [names[e] for e in p.fwd_elements[0].tolist() if e >= 0],
            "rev": [names[e] for e in p.rev_elements[0].tolist() if e >= 0],
            "fwd_base_ns": float(p.fwd_base_ns[0]),
            "rev_base_ns": float(p.rev_base_ns[0]),
            "reachable": not (bool(p.fwd_dark[0]) or bool(p.rev_dark[0])),
        }

    def model_index(self, hosts: Sequence[str]) -> npt.NDArray[np.int32]:
        index = {h: i for i, h in enumerate(self.fabric.hosts)}
        return np.array([index[h] for h in hosts], np.int32)

    # --- discovered paths, kept between windows (docs/paths.md, "Known paths") ------
    def _with_cached(self, fresh: list[PathRecord], keys: I64, end_s: float) -> list[PathRecord]:
        """This window's records (``keys``: their path cache keys), a known path standing
        in (``cached``) where the fresh trace named no spine or the flow was not traced;
        known paths are kept for ``PATH_CACHE_S`` seconds of simulated time and forgotten
        when the model changes."""
        horizon = self.params.epoch_ns + int((end_s - PATH_CACHE_S) * 1e9)
        cache = {k: p for k, p in self.path_cache.items() if p.t_ns >= horizon}
        out = list(fresh)
        order = keys.tolist()
        for i, (path, key) in enumerate(zip(fresh, order, strict=True)):
            if path.known:
                cache[key] = path
            elif key in cache:
                out[i] = cache[key].as_cached()
        seen = set(order)
        out += [p.as_cached() for k, p in cache.items() if k not in seen]
        self.path_cache = cache
        return out

    # --- probing --------------------------------------------------------------------
    def probe(self, duration_s: float) -> ProbeWindow:
        """Run the next probing window of ``duration_s`` seconds (deterministic per seed)."""

        if not duration_s > 0:
            raise InputError(f"--duration must be > 0 seconds, got {duration_s}")
        rng = np.random.default_rng(self._window_seq.spawn(1)[0])
        with paused_gc():  # half a million path records at 10 000 hosts, no cycles
            self.clocks.forget_before(self.elapsed_s * 1e9)  # no window reads before its own
            window = simulate_window(self, self.elapsed_s, duration_s, rng)
            window.paths = self._with_cached(
                window.paths, window.path_keys, window.start_s + duration_s
            )
        self.elapsed_s += duration_s
        self.windows += 1
        return window
