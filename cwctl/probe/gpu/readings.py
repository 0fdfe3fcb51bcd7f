"""One GPU's raw reading, and the ``gpu`` record built from a window's two readings.

Part of the agent bundle: standard library only, Python 3.8+ syntax, no annotations.
"""

RECORD_VERSION = 1

# Clock-event (throttle) reason bits of nvml.h (nvmlClocksEventReason*), with the names
# nvidia-smi uses for them (clocks_event_reasons.<name>).
THROTTLE_BITS = (
    (0x1, "gpu_idle"),
    (0x2, "applications_clocks_setting"),
    (0x4, "sw_power_cap"),
    (0x8, "hw_slowdown"),
    (0x10, "sync_boost"),
    (0x20, "sw_thermal_slowdown"),
    (0x40, "hw_thermal_slowdown"),
    (0x80, "hw_power_brake_slowdown"),
    (0x100, "display_clock_setting"),
)


GROUP = {
    "ecc.uncorrected_volatile": "ecc",
    "ecc.corrected_volatile": "ecc",
    "retired_pages.sbe": "retired_pages",
    "retired_pages.dbe": "retired_pages",
    "retired_pages.pending": "retired_pages",
    "remapped_rows.correctable": "remapped_rows",
    "remapped_rows.uncorrectable": "remapped_rows",
    "remapped_rows.pending": "remapped_rows",
    "remapped_rows.failure": "remapped_rows",
    "throttle_mask": "throttle",
}
_COUNTERS = (
    "ecc.uncorrected_volatile",
    "ecc.corrected_volatile",
    "retired_pages.sbe",
    "retired_pages.dbe",
    "remapped_rows.correctable",
    "remapped_rows.uncorrectable",
    "pcie_replay",
)
_FLAGS = ("retired_pages.pending", "remapped_rows.pending", "remapped_rows.failure")
_GAUGES = (
    "util_pct",
    "mem_used_bytes",
    "mem_total_bytes",
    "temp_c",
    "power_w",
    "sm_clock_mhz",
)
_NVLINK_COUNTERS = ("replay", "recovery", "crc")
MIB = 1024 * 1024


def gpu_decode_throttle(mask):
    """The names of the clock-event reason bits set in ``mask`` (NVML's bit order)."""
    if mask is None:
        return []
    return [name for bit, name in THROTTLE_BITS if mask & bit]


def gpu_new_reading(index=None):
    """An empty raw reading of one GPU: what both sources fill and ``gpu_build`` reads."""
    return {
        "index": index,
        "name": None,
        "uuid": None,
        "pci_bus_id": None,
        "util_pct": None,
        "mem_used_bytes": None,
        "mem_total_bytes": None,
        "temp_c": None,
        "power_w": None,
        "sm_clock_mhz": None,
        "throttle_mask": None,
        "counters": {},  # name -> int total
        "flags": {},  # name -> bool
        "nvlink": {},  # link -> {"active": bool|None, "replay": int, ...}
        "unsupported": set(),
        "errors": {},
        "lost": False,
    }


def gpu_pci_key(bus_id):
    """``00000000:2B:00.0``, ``0000:2b:00`` and ``PCI:0000:2b:00`` all give ``0000:2b:00``."""
    if not bus_id:
        return None
    text = bus_id.strip().lower()
    if text.startswith("pci:"):
        text = text[4:]
    parts = text.split(":")
    if len(parts) < 3:
        return None
    domain, bus, dev = parts[-3], parts[-2], parts[-1].split(".")[0]
    try:
        return f"{int(domain, 16) & 0xFFFF:04x}:{int(bus, 16):02x}:{int(dev, 16):02x}"
    except ValueError:
        return None


def _counter(before, after):
    if after is None:
        return None
    delta = after - before if before is not None and after >= before else None
    return {"total": after, "delta": delta}


def _match(readings, reading):
    """The reading of ``readings`` of the same GPU: same UUID, else PCI address, else index."""
    keys = (
        ("uuid", lambda r: r.get("uuid")),
        ("pci", lambda r: gpu_pci_key(r.get("pci_bus_id"))),
        ("index", lambda r: r.get("index")),
    )
    for _, key_of in keys:
        value = key_of(reading)
        if value is None:
            continue
        for other in readings:
            if key_of(other) == value:
                return other
    return None


def gpu_build(before, after, xids=()):
    """The record's ``gpus`` list: ``after`` readings, counters as totals and deltas
    since the matching ``before`` reading, and the XID events ``xids``
    (``{"index"|"pci", "code", "t", "text"}``) attributed to their GPU."""
    gpus = []
    for reading in after:
        base = _match(before, reading) or gpu_new_reading()
        counters, flags = reading["counters"], reading["flags"]
        bc = base["counters"]
        gpu = {}
        for key in ("index", "name", "uuid", "pci_bus_id"):  # a lost GPU keeps its identity
            gpu[key] = reading[key] if reading[key] is not None else base[key]
        for key in _GAUGES:
            gpu[key] = reading[key]
        gpu["throttle"] = gpu_decode_throttle(reading["throttle_mask"])
        gpu["throttle_mask"] = reading["throttle_mask"]
        gpu["ecc"] = {
            "uncorrected_volatile": _counter(
                bc.get("ecc.uncorrected_volatile"), counters.get("ecc.uncorrected_volatile")
            ),
            "corrected_volatile": _counter(
                bc.get("ecc.corrected_volatile"), counters.get("ecc.corrected_volatile")
            ),
        }
        gpu["retired_pages"] = {
            "sbe": _counter(bc.get("retired_pages.sbe"), counters.get("retired_pages.sbe")),
            "dbe": _counter(bc.get("retired_pages.dbe"), counters.get("retired_pages.dbe")),
            "pending": flags.get("retired_pages.pending"),
        }
        gpu["remapped_rows"] = {
            "correctable": _counter(
                bc.get("remapped_rows.correctable"), counters.get("remapped_rows.correctable")
            ),
            "uncorrectable": _counter(
                bc.get("remapped_rows.uncorrectable"), counters.get("remapped_rows.uncorrectable")
            ),
            "pending": flags.get("remapped_rows.pending"),
            "failure": flags.get("remapped_rows.failure"),
        }
        gpu["pcie_replay"] = _counter(bc.get("pcie_replay"), counters.get("pcie_replay"))
        links = []
        for link in sorted(reading["nvlink"]):
            now = reading["nvlink"][link]
            then = base["nvlink"].get(link, {})
            entry = {"link": link, "active": now.get("active")}
            for name in _NVLINK_COUNTERS:
                entry[name] = _counter(then.get(name), now.get(name))
            links.append(entry)
        gpu["nvlink"] = links
        pci = gpu_pci_key(gpu["pci_bus_id"])
        gpu["xid"] = [
            {"code": x["code"], "t": x.get("t"), "text": x.get("text")}
            for x in xids
            if (x.get("index") is not None and x.get("index") == gpu["index"])
            or (x.get("index") is None and x.get("pci") is not None and x.get("pci") == pci)
        ]
        gpu["unsupported"] = sorted(reading["unsupported"] | base["unsupported"])
        gpu["errors"] = dict(reading["errors"])
        gpu["lost"] = bool(reading["lost"])
        gpus.append(gpu)
    # XID events of a GPU no reading names (e.g. fallen off the bus before the window).
    named = {g["index"] for g in gpus} | {gpu_pci_key(g["pci_bus_id"]) for g in gpus}
    named.discard(None)
    for x in xids:
        if x.get("index") in named or x.get("pci") in named:
            continue
        orphan = gpu_build([], [gpu_new_reading(x.get("index"))], [])[0]
        orphan["pci_bus_id"] = x.get("pci")
        orphan["xid"] = [{"code": x["code"], "t": x.get("t"), "text": x.get("text")}]
        orphan["unsupported"] = []
        gpus.append(orphan)
        named.add(x.get("index") if x.get("index") is not None else x.get("pci"))
    return gpus


def gpu_record(host, source, status, gpus, t_ns, t_start_ns=None, error=None, driver=None):
    """One ``gpu`` record of ``cwctl.rec/1``."""
    rec = {
        "type": "gpu",
        "v": RECORD_VERSION,
        "host": host,
        "t": t_ns,
        "t_start": t_start_ns,
        "source": source,
        "status": status,
        "driver": driver,
        "gpus": gpus,
    }
    if error is not None:
        rec["error"] = error
    return rec
