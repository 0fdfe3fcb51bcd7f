"""The ``sim`` transport: no processes, a seeded model of the fabric produces the records.

``collect_sim(request, progress)`` is the pipeline's entry (``--sim``); ``simulate(options,
duration_s)`` the same, synchronous, for benches and tests. Both build a
``cwctl.sim.FabricModel`` (the default leaf-spine fabric, or the inventory's topology
when the request names one) and run one probing window on it. To keep one model across
scans (actions change it, a rescan shows the effect), build it with ``model_for`` and
pass it as ``model=``.
"""

from __future__ import annotations

import asyncio
from dataclasses import asdict
from typing import Any

from cwctl.collection import Collection, HostInfo, HostStatus
from cwctl.pipeline import Progress, ScanRequest, SimOptions
from cwctl.records.path import PathTable
from cwctl.sim.applied import applied_changes
from cwctl.sim.fabric import HIDDEN_LEAF
from cwctl.sim.model import FabricModel
from cwctl.sim.params import SimParams

_PROBE_KEYS = {"rate": "rate", "peers": "peers", "ports": "ports", "gap_us": "gap_ns"}


def _params(
    options: SimOptions, probe: Any = None, overrides: dict[str, Any] | None = None
) -> SimParams:
    """SimParams from the options, the inventory's [probe] section and flag overrides."""
    knobs: dict[str, Any] = {"timestamps": options.timestamps, "load": options.load}
    sources = [asdict(probe) if probe is not None else {}, overrides or {}]
    for source in sources:
        for key, name in _PROBE_KEYS.items():
            if source.get(key) is not None:
                value = source[key]
                knobs[name] = round(float(value) * 1000) if key == "gap_us" else value
    return SimParams(**knobs)


def model_for(request: ScanRequest | None = None, options: SimOptions | None = None) -> FabricModel:
    """The model a request describes: its inventory's topology, else the leaf-spine default."""
    options = options or (request.sim if request is not None else None) or SimOptions()
    overrides = request.overrides if request is not None else {}
    inventory_path = request.inventory if request is not None else None
    if inventory_path is not None:
        from cwctl.inventory import load_inventory

        inv = load_inventory(inventory_path)
        model = FabricModel(
            [h.name for h in inv.hosts],
            inv.topology(),
            params=_params(options, inv.probe, overrides),
            seed=options.seed,
            faults=options.faults,
            nics={h.name: h.nics for h in inv.hosts if h.nics},
        )
        model.host_addresses = {h.name: h.address for h in inv.hosts}
        model.default_duration_s = inv.probe.duration
        return model
    return FabricModel.leaf_spine(
        options.hosts,
        options.hosts_per_leaf,
        options.spines,
        params=_params(options, None, overrides),
        seed=options.seed,
        faults=options.faults,
    )


def run_model(model: FabricModel, duration_s: float) -> Collection:
    """One probing window of ``model`` as a ``Collection`` (source ``sim``)."""
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
        },
    )


def simulate(
    options: SimOptions | None = None,
    duration_s: float | None = None,
    *,
    request: ScanRequest | None = None,
    model: FabricModel | None = None,
) -> Collection:
    """Synchronous ``collect_sim``: one window of a fresh model from ``options`` (or of
    ``model``), ``duration_s`` long (default: the inventory's, else 2 s)."""
    model = model or model_for(request, options)
    return run_model(model, duration_s or model.default_duration_s)


_KEPT: dict[str, FabricModel] = {}


def kept_model(request: ScanRequest) -> FabricModel:
    """This process's model for ``request``, built on first use and kept.

    For callers that scan again and again (the TUI, ``--verify`` after an action): each
    scan is the next window of the same fabric, so clocks drift on, ``@T`` faults
    appear when their time comes, and changes applied to the model stay applied.
    """
    key = repr((request.sim, request.inventory, sorted(request.overrides.items())))
    model = _KEPT.get(key)
    if model is None:
        model = _KEPT[key] = model_for(request)
        _restore_actions(model, request)
    return model


def _restore_actions(model: FabricModel, request: ScanRequest) -> None:
    # Added by the actions part: changes applied with `cwctl reroute/drain --sim --apply`
    # are saved in the state dir; a fresh model starts from them, so a later scan sees
    # the effect (cwctl/actions/simulated.py, docs/actions.md).
    from cwctl.actions.simulated import restore_saved_state

    restore_saved_state(model, request)


def forget_kept_models() -> None:
    _KEPT.clear()


async def collect_sim(
    request: ScanRequest,
    progress: Progress | None = None,
    *,
    model: FabricModel | None = None,
    keep: bool = False,
) -> Collection:
    """The pipeline's sim transport: one window of a fresh model (of ``model``; of the
    kept model with ``keep``). The numpy work runs in a thread, so a TUI stays live."""
    if model is None:
        build = kept_model if keep else model_for
        model = await asyncio.to_thread(build, request)
        if not keep:
            _restore_actions(model, request)  # kept models restore once, when built
    n = model.fabric.n_hosts
    duration_s = request.duration_s or model.default_duration_s
    if progress is not None:
        progress("started", {"hosts": n, "of": n, "source": "sim"})
    collection = await asyncio.to_thread(run_model, model, duration_s)
    if progress is not None:
        progress("records", {"records": len(collection.table)})
        progress("done", {"ok": n, "of": n})
    return collection
