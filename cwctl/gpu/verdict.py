"""Verdicts on a host's GPUs from its ``gpu`` records: ok, warn or fail, with the reason.

``assess(records)`` reads one host's ``gpu`` records (``docs/records-gpu.md``), merges
them per GPU (the last reading wins; counter deltas add up over the records; XID events
accumulate), and judges every GPU. The host's verdict is its worst GPU's. What is judged,
worst first:

fail  the GPU is lost (fallen off the bus, not answering), a ``fail`` XID of the
      catalogue (``cwctl.gpu.xid``), uncorrectable ECC errors during the window, a
      double-bit page retirement during the window, a row-remapping failure, NVLink
      recovery errors rising on a link.
warn  a ``warn`` XID, uncorrectable ECC errors since the driver loaded (not in the
      window), a pending row remap or page retirement (reset the GPU), NVLink CRC or
      replay errors rising, a link down while others are up, HW slowdown or thermal
      throttling, PCIe replays rising, a sampler that failed on the host.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from cwctl.gpu.xid import describe
from cwctl.records.bounds import printable

Verdict = Literal["ok", "warn", "fail", "none"]
_RANK: Final = {"none": 0, "ok": 1, "warn": 2, "fail": 3}
_HW_SLOWDOWN: Final = ("hw_slowdown", "hw_power_brake_slowdown")
_THERMAL: Final = ("hw_thermal_slowdown", "sw_thermal_slowdown")
# Counters of a GPU entry, as paths into it; their deltas add up over records.
_COUNTER_PATHS: Final = (
    ("ecc", "uncorrected_volatile"),
    ("ecc", "corrected_volatile"),
    ("retired_pages", "sbe"),
    ("retired_pages", "dbe"),
    ("remapped_rows", "correctable"),
    ("remapped_rows", "uncorrectable"),
    ("pcie_replay",),
)
_NVLINK_COUNTERS: Final = ("replay", "recovery", "crc")


def worst(verdicts: Iterable[str]) -> Verdict:
    """The worst of ``verdicts`` (``none`` when there are none)."""
    best: Verdict = "none"
    for v in verdicts:
        if _RANK[v] > _RANK[best]:
            best = v  # type: ignore[assignment]
    return best


@dataclass
class GpuHealth:
    """One host's GPU health. ``gpus`` are the record's per-GPU dicts (keys documented in
    ``docs/records-gpu.md``) with ``verdict``, ``reason`` and ``reasons`` added."""

    verdict: Verdict
    reason: str | None = None
    gpus: list[dict[str, Any]] = field(default_factory=list)
    source: str | None = None  # nvml | nvidia-smi | none

    @property
    def failing(self) -> bool:
        return self.verdict == "fail"

    def to_json(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "reason": self.reason,
            "source": self.source,
            "gpus": self.gpus,
        }


def _get(d: Mapping[str, Any] | None, path: tuple[str, ...]) -> Any:
    for key in path:
        if not isinstance(d, Mapping):
            return None
        d = d.get(key)
    return d


def _delta(counter: Any) -> int:
    if isinstance(counter, Mapping) and isinstance(counter.get("delta"), int):
        return int(counter["delta"])
    return 0


def _total(counter: Any) -> int:
    if isinstance(counter, Mapping) and isinstance(counter.get("total"), int):
        return int(counter["total"])
    return 0


def _gpu_key(gpu: Mapping[str, Any]) -> tuple[str, Any]:
    for key in ("uuid", "pci_bus_id", "index"):
        if isinstance(gpu.get(key), (str, int)):
            return key, gpu[key]
    return "id", id(gpu)


def _add_deltas(into: dict[str, Any], older: Mapping[str, Any]) -> None:
    """Add ``older``'s counter deltas to ``into``'s (a later reading of the same GPU)."""
    for path in _COUNTER_PATHS:
        new, old = _get(into, path), _get(older, path)
        if isinstance(new, dict) and isinstance(_get(old, ("delta",)), int):
            new["delta"] = _delta(new) + _delta(old)
    old_links = {ln.get("link"): ln for ln in _list(older.get("nvlink")) if isinstance(ln, dict)}
    for link in _list(into.get("nvlink")):
        prev = old_links.get(link.get("link")) if isinstance(link, dict) else None
        if prev is None:
            continue
        for name in _NVLINK_COUNTERS:
            if isinstance(link.get(name), dict) and isinstance(_get(prev, (name, "delta")), int):
                link[name]["delta"] = _delta(link[name]) + _delta(prev[name])
    into["xid"] = _list(older.get("xid")) + _list(into.get("xid"))


def _list(value: Any) -> list[Any]:
    """A record's list field, [] where a record (an agent's word, or a file's) has another
    type there."""
    return list(value) if isinstance(value, list) else []


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _index(gpu: Mapping[str, Any]) -> int:
    return gpu["index"] if _is_int(gpu.get("index")) else 0


# a GPU entry's keys (docs/records-gpu.md): nothing else an agent or a file wrote reaches a
# report
GPU_KEYS: Final = frozenset(
    {
        "index", "name", "uuid", "pci_bus_id", "util_pct", "mem_used_bytes", "mem_total_bytes",
        "temp_c", "power_w", "sm_clock_mhz", "throttle", "throttle_mask", "ecc",
        "retired_pages", "remapped_rows", "pcie_replay", "nvlink", "xid", "unsupported",
        "errors", "lost",
    }
)  # fmt: skip


def merge_gpus(records: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per-GPU entries of a host's records, oldest record first: last reading wins."""
    merged: dict[tuple[str, Any], dict[str, Any]] = {}
    for rec in records:
        for gpu in _list(rec.get("gpus")):
            if not isinstance(gpu, Mapping):
                continue
            entry = copy.deepcopy({k: v for k, v in gpu.items() if k in GPU_KEYS})
            key = _gpu_key(entry)
            if key in merged:
                _add_deltas(entry, merged[key])
            merged[key] = entry
    return sorted(merged.values(), key=lambda g: (not _is_int(g.get("index")), _index(g)))


def _findings(gpu: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(severity, reason) pairs for one GPU entry, in the order they were checked."""
    out: list[tuple[str, str]] = []
    seen: set[int] = set()
    for event in _list(gpu.get("xid")):
        code = event.get("code") if isinstance(event, Mapping) else None
        if not isinstance(code, int) or code in seen:
            continue
        seen.add(code)
        info = describe(code)
        out.append((info.severity, f"XID {code}: {info.description}"))
    if gpu.get("lost"):
        out.append(("fail", "GPU lost: it no longer answers (fallen off the bus?)"))
    ecc_unc = _get(gpu, ("ecc", "uncorrected_volatile"))
    if _delta(ecc_unc) > 0:
        out.append(("fail", f"uncorrectable ECC errors (+{_delta(ecc_unc)} during the window)"))
    elif _total(ecc_unc) > 0:
        total = _total(ecc_unc)
        out.append(("warn", f"uncorrectable ECC errors since the driver loaded ({total})"))
    dbe = _get(gpu, ("retired_pages", "dbe"))
    if _delta(dbe) > 0:
        out.append(("fail", f"pages retired for double-bit ECC errors (+{_delta(dbe)})"))
    if _get(gpu, ("remapped_rows", "failure")) is True:
        out.append(("fail", "row remapping failure"))
    if _get(gpu, ("remapped_rows", "pending")) is True:
        out.append(("warn", "row remapping pending (reset the GPU)"))
    if _get(gpu, ("retired_pages", "pending")) is True:
        out.append(("warn", "page retirement pending (reset the GPU)"))
    out.extend(_nvlink_findings(_list(gpu.get("nvlink"))))
    throttle = {t for t in _list(gpu.get("throttle")) if isinstance(t, str)}
    if throttle.intersection(_HW_SLOWDOWN):
        out.append(("warn", "HW slowdown throttling"))
    if throttle.intersection(_THERMAL):
        out.append(("warn", "thermal throttling"))
    replay = gpu.get("pcie_replay")
    if _delta(replay) > 0:
        out.append(("warn", f"PCIe replays rising (+{_delta(replay)})"))
    return out


def _nvlink_findings(links: list[Any]) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    links = [ln for ln in links if isinstance(ln, Mapping)]
    any_up = any(ln.get("active") is True for ln in links)
    for ln in links:
        n = ln.get("link")
        for name, label, severity in (
            ("recovery", "recovery", "fail"),
            ("crc", "CRC", "warn"),
            ("replay", "replay", "warn"),
        ):
            rise = _delta(ln.get(name))
            if rise > 0:
                out.append((severity, f"NVLink {label} errors rising on link {n} (+{rise})"))
        if any_up and ln.get("active") is False:
            out.append(("warn", f"NVLink link {n} down"))
    return out


def judge_gpu(gpu: dict[str, Any]) -> dict[str, Any]:
    """Add ``verdict``, ``reason`` (the worst finding) and ``reasons`` (all) to ``gpu``."""
    found = _findings(gpu)
    verdict = worst(sev for sev, _ in found) if found else "ok"
    gpu["verdict"] = verdict
    gpu["reasons"] = [reason for _, reason in sorted(found, key=lambda f: -_RANK[f[0]])]
    gpu["reason"] = gpu["reasons"][0] if found else None
    return gpu


def assess(records: Iterable[Mapping[str, Any]]) -> GpuHealth:
    """The GPU health of one host from its ``gpu`` records (oldest first).

    ``none`` when there are no records or the host has no GPU; otherwise the worst GPU's
    verdict, its reason prefixed with the GPU's index (``"GPU 3: XID 79: ..."``).
    """
    recs = [r for r in records if isinstance(r, Mapping) and r.get("type", "gpu") == "gpu"]
    if not recs:
        return GpuHealth("none")
    source = recs[-1].get("source") if isinstance(recs[-1].get("source"), str) else None
    gpus = [judge_gpu(g) for g in merge_gpus(recs)]
    candidates: list[tuple[str, str]] = []
    for gpu in gpus:
        if gpu["verdict"] != "ok":
            name = f"GPU {gpu['index']}" if _is_int(gpu.get("index")) else "GPU"
            if not _is_int(gpu.get("index")) and isinstance(gpu.get("pci_bus_id"), str):
                name = f"GPU {printable(gpu['pci_bus_id'], 40)}"
            candidates.append((gpu["verdict"], f"{name}: {gpu['reason']}"))
    failed = [r for r in recs if r.get("status") == "error"]
    if failed:
        error = printable(str(failed[-1].get("error") or "unknown error"))
        candidates.append(("warn", f"GPU sampling failed: {error}"))
    if not gpus and not failed:
        return GpuHealth("none", None, [], source)
    verdict = worst(sev for sev, _ in candidates) if candidates else "ok"
    reason = next((text for sev, text in candidates if sev == verdict), None)
    return GpuHealth(verdict, reason, gpus, source)
