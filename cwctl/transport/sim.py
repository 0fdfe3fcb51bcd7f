"""The ``sim`` source: no processes, a seeded model of the fabric produces the records.

``SimSource(request)`` is what a session scans with ``--sim``: it builds one
``cwctl.sim.FabricModel`` (the default leaf-spine fabric, or the inventory's topology
when the request names one) on first use, with the changes earlier actions saved
(``cwctl.sim.state``), and keeps it: each scan is the next probing window of the same
fabric, so clocks drift on, ``@T`` faults appear when their time comes, and changes
applied to ``source.model`` show in the next scan. ``simulate(options, duration_s)`` is
one window of a fresh model, synchronous, for benches and tests.
"""

from __future__ import annotations

import asyncio
from dataclasses import asdict, replace
from typing import Any

from cwctl.inventory import ProbeSettings
from cwctl.records.path import PathTable
from cwctl.scan.budgets import report_params
from cwctl.scan.collection import Collection, HostInfo, HostStatus
from cwctl.scan.request import Progress, ScanRequest, SimOptions
from cwctl.sim.applied import applied_changes
from cwctl.sim.fabric import HIDDEN_LEAF
from cwctl.sim.model import FabricModel
from cwctl.sim.params import SimParams
from cwctl.sim.state import restore_saved_state
from cwctl.transport.plan import budget_params, resolve_probe

_PROBE_KEYS = {"rate": "rate", "peers": "peers", "ports": "ports", "gap_us": "gap_ns"}


def _params(options: SimOptions, probe: Any = None) -> SimParams:
    """SimParams from the options and the probe settings (the flags' already over them:
    ``resolve_probe``)."""
    knobs: dict[str, Any] = {
        "timestamps": options.timestamps,
        "load": options.load,
        "ecmp": options.ecmp,
        "discovery": options.discovery,
    }
    source = asdict(probe) if probe is not None else {}
    for key, name in _PROBE_KEYS.items():
        if source.get(key) is not None:
            value = source[key]
            knobs[name] = round(float(value) * 1000) if key == "gap_us" else value
    return SimParams(**knobs)


def model_for(request: ScanRequest | None = None, options: SimOptions | None = None) -> FabricModel:
    """The model a request describes: its inventory's topology, else the leaf-spine default;
    probing at the request's budget (``cwctl.transport.plan.resolve_probe``)."""
    request = request if request is not None else ScanRequest()
    options = options or request.sim or SimOptions()
    if request.inventory is not None:
        from cwctl.inventory import load_inventory

        inv = load_inventory(request.inventory)
        probe = resolve_probe(request, inv.probe, len(inv.hosts))
        model = FabricModel(
            [h.name for h in inv.hosts],
            inv.topology(),
            params=_params(options, probe),
            seed=options.seed,
            faults=options.faults,
            nics={h.name: h.nics for h in inv.hosts if h.nics},
        )
        model.host_addresses = {h.name: h.address for h in inv.hosts}
        model.inventory_probe = inv.probe
    else:
        probe = resolve_probe(request, hosts=options.hosts)
        model = FabricModel.leaf_spine(
            options.hosts,
            options.hosts_per_leaf,
            options.spines,
            params=_params(options, probe),
            seed=options.seed,
            faults=options.faults,
        )
    model.default_duration_s = float(probe.duration or model.default_duration_s)
    return model


def run_model(
    model: FabricModel, duration_s: float, probe: ProbeSettings | None = None
) -> Collection:
    """One probing window of ``model`` as a ``Collection`` (source ``sim``); ``probe``: the
    settings it runs at (``resolve_probe``'s: its rate and ports replace the model's),
    else the model's own."""
    if probe is not None and probe.rate is not None and probe.ports is not None:
        rate, ports = float(probe.rate), int(probe.ports)
        if (rate, ports) != (model.params.rate, model.params.ports):
            model.params = replace(model.params, rate=rate, ports=ports)
    window = model.probe(duration_s)
    fabric, params = model.fabric, model.params
    hosts = [
        HostInfo(
            name=name,
            address=model.host_addresses.get(name, f"sim:{name}"),
            leaf=None
            if fabric.leaves[int(fabric.host_leaf[i])] == HIDDEN_LEAF
            else fabric.leaves[int(fabric.host_leaf[i])],
            nics=fabric.nics[i],
        )
        for i, name in enumerate(fabric.hosts)
    ]
    return Collection(
        source="sim",
        hosts=hosts,
        table=window.table,
        duration_s=duration_s,
        status={name: HostStatus() for name in fabric.hosts},
        topology=model.published_topology(),
        peers={h: list(ps) for h, ps in model.peers.items()},
        truth={**window.truth, "applied": applied_changes(model.state)},
        paths=PathTable.of(window.paths),
        params={
            "simulated": True,
            "seed": model.seed,
            "faults": [f.spec for f, _ in model.faults],
            "timestamps": params.timestamps,
            "load": params.load,
            "hosts": fabric.n_hosts,
            "leaves": len([leaf for leaf in fabric.leaves if leaf != HIDDEN_LEAF]),
            "spines": fabric.n_spines,
            "rate": params.rate,
            "peers": params.peers,
            "ports": params.ports,
            "gap_ns": params.gap_ns,
            "answer_port": params.answer_port,
            "ecmp": params.ecmp,
            "discovery": params.discovery,
            "window_start_s": window.start_s,
            "window": model.windows,
            "budget": budget_params(probe, fabric.n_hosts)
            if probe is not None
            else report_params(None, params.rate, duration_s, params.peers, fabric.n_hosts),
        },
    )


def simulate(
    options: SimOptions | None = None,
    duration_s: float | None = None,
    *,
    request: ScanRequest | None = None,
    model: FabricModel | None = None,
) -> Collection:
    """One window of a fresh model from ``options`` (or of
    ``model``), ``duration_s`` long (default: the inventory's, else
    ``settings.PROBE_DURATION_S``)."""
    model = model or model_for(request, options)
    return run_model(model, duration_s or model.default_duration_s)


class SimSource:
    """The simulator as a session's source; its model is the state kept between scans."""

    name = "sim"

    def __init__(self, request: ScanRequest, *, model: FabricModel | None = None) -> None:
        self.request = request
        self._model = model

    @property
    def model(self) -> FabricModel:
        """The fabric every scan of this source probes, built (and restored) on first use."""
        return self._model if self._model is not None else self._load()

    def _load(self) -> FabricModel:
        model = model_for(self.request)
        restore_saved_state(model, self.request)
        self._model = model
        return model

    async def scan(self, request: ScanRequest, progress: Progress | None = None) -> Collection:
        """The next window of the model. The numpy work runs in a thread (a TUI stays live)."""
        model = self._model if self._model is not None else await asyncio.to_thread(self._load)
        n = model.fabric.n_hosts
        probe = resolve_probe(request, model.inventory_probe, n)
        duration_s = float(probe.duration or model.default_duration_s)
        if progress is not None:
            progress("started", {"hosts": n, "of": n, "source": "sim"})
        collection = await asyncio.to_thread(run_model, model, duration_s, probe)
        if progress is not None:
            progress("records", {"records": len(collection.table)})
            progress("done", {"ok": n, "of": n})
        return collection

    async def aclose(self) -> None:
        """Nothing to release: the model lives as long as the source."""
