"""GPU sampling for the probe agent: what the host's GPUs say during the probing window.

Stdlib only, Python 3.8+: this file is concatenated in front of ``agent.py`` and runs on
remote hosts, so it imports nothing from cwctl, uses no 3.10+ syntax and has no
``from __future__`` import (it would have to be the first line of the bundle). Its
top-level names carry a ``Gpu``/``gpu_``/``smi_``/``_GPU``/``_gpu`` prefix so that they
cannot collide with the agent's.

``GpuSampler(host).start()`` takes a baseline of every counter and starts watching for
XID events; ``.stop()`` takes the final reading and returns the ``gpu`` records (one,
today) that the agent prints. Sources, best first:

``nvml``        ``pynvml`` (nvidia-ml-py) imports: NVML calls, XID events through
                ``nvmlDeviceRegisterEvents`` / ``nvmlEventSetWait``.
``nvidia-smi``  ``nvidia-smi`` is on the PATH: ``--query-gpu`` CSV, ``nvlink -e`` /
                ``nvlink -s``, ``-q`` (PCIe replays), XID lines from ``/dev/kmsg``.
``none``        neither: status ``no-gpu``, which is not an error.

A reading a GPU does not support is listed in the GPU's ``unsupported`` list; it is not
a failure. ``docs/records-gpu.md`` documents every field of the record.
"""

import contextlib
import os
import re
import shutil
import subprocess
import threading
import time

GPU_RECORD_VERSION = 1

# Clock-event (throttle) reason bits of nvml.h (nvmlClocksEventReason*), with the names
# nvidia-smi uses for them (clocks_event_reasons.<name>).
GPU_THROTTLE_BITS = (
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

# NVML constants, by value, for a pynvml too old to define them all.
_GPU_NVML_ERROR_NOT_SUPPORTED = 3
_GPU_NVML_ERROR_INVALID_ARGUMENT = 2
_GPU_NVML_ERROR_DRIVER_NOT_LOADED = 9
_GPU_NVML_ERROR_TIMEOUT = 10
_GPU_NVML_ERROR_LIBRARY_NOT_FOUND = 12
_GPU_NVML_ERROR_FUNCTION_NOT_FOUND = 13
_GPU_NVML_ERROR_GPU_IS_LOST = 15
_GPU_NVML_NO_GPU_ERRORS = (_GPU_NVML_ERROR_LIBRARY_NOT_FOUND, _GPU_NVML_ERROR_DRIVER_NOT_LOADED)
_GPU_NVML_UNSUPPORTED_ERRORS = (_GPU_NVML_ERROR_NOT_SUPPORTED, _GPU_NVML_ERROR_FUNCTION_NOT_FOUND)
_GPU_NVML_NO_LINK_ERRORS = (*_GPU_NVML_UNSUPPORTED_ERRORS, _GPU_NVML_ERROR_INVALID_ARGUMENT)
_GPU_XID_EVENT_BIT = 0x8  # nvmlEventTypeXidCriticalError
_GPU_EVENT_WAIT_MS = 250  # how long one nvmlEventSetWait blocks; bounds stop()'s latency

_GPU_SMI_TIMEOUT_S = 15.0
# --query-gpu fields, newest spelling first: an nvidia-smi that does not know a field
# rejects the whole query, so older field sets follow.
SMI_QUERY_FIELDS = (
    "index",
    "name",
    "uuid",
    "pci.bus_id",
    "utilization.gpu",
    "memory.used",
    "memory.total",
    "temperature.gpu",
    "power.draw",
    "clocks.current.sm",
    "clocks_event_reasons.active",
    "ecc.errors.uncorrected.volatile.total",
    "ecc.errors.corrected.volatile.total",
    "retired_pages.single_bit_ecc.count",
    "retired_pages.double_bit.count",
    "retired_pages.pending",
    "remapped_rows.correctable",
    "remapped_rows.uncorrectable",
    "remapped_rows.pending",
    "remapped_rows.failure",
)
SMI_QUERY_FIELD_SETS = (
    SMI_QUERY_FIELDS,
    tuple(
        "clocks_throttle_reasons.active" if f == "clocks_event_reasons.active" else f
        for f in SMI_QUERY_FIELDS
        if not f.startswith("remapped_rows.")
    ),
    SMI_QUERY_FIELDS[:10],
)
# Which reading each field feeds, and how: (kind, key). Kinds: s str, i int, f float,
# mib MiB -> bytes, hex bitmask, c counter, b yes/no flag.
_GPU_SMI_FIELD_MAP = {
    "index": ("i", "index"),
    "name": ("s", "name"),
    "uuid": ("s", "uuid"),
    "pci.bus_id": ("s", "pci_bus_id"),
    "utilization.gpu": ("i", "util_pct"),
    "memory.used": ("mib", "mem_used_bytes"),
    "memory.total": ("mib", "mem_total_bytes"),
    "temperature.gpu": ("i", "temp_c"),
    "power.draw": ("f", "power_w"),
    "clocks.current.sm": ("i", "sm_clock_mhz"),
    "clocks.sm": ("i", "sm_clock_mhz"),
    "clocks_event_reasons.active": ("hex", "throttle_mask"),
    "clocks_throttle_reasons.active": ("hex", "throttle_mask"),
    "ecc.errors.uncorrected.volatile.total": ("c", "ecc.uncorrected_volatile"),
    "ecc.errors.corrected.volatile.total": ("c", "ecc.corrected_volatile"),
    "retired_pages.single_bit_ecc.count": ("c", "retired_pages.sbe"),
    "retired_pages.double_bit.count": ("c", "retired_pages.dbe"),
    "retired_pages.pending": ("b", "retired_pages.pending"),
    "remapped_rows.correctable": ("c", "remapped_rows.correctable"),
    "remapped_rows.uncorrectable": ("c", "remapped_rows.uncorrectable"),
    "remapped_rows.pending": ("b", "remapped_rows.pending"),
    "remapped_rows.failure": ("b", "remapped_rows.failure"),
}
# The group a missing reading is reported under in ``unsupported``.
_GPU_GROUP = {
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
_GPU_COUNTERS = (
    "ecc.uncorrected_volatile",
    "ecc.corrected_volatile",
    "retired_pages.sbe",
    "retired_pages.dbe",
    "remapped_rows.correctable",
    "remapped_rows.uncorrectable",
    "pcie_replay",
)
_GPU_FLAGS = ("retired_pages.pending", "remapped_rows.pending", "remapped_rows.failure")
_GPU_GAUGES = (
    "util_pct",
    "mem_used_bytes",
    "mem_total_bytes",
    "temp_c",
    "power_w",
    "sm_clock_mhz",
)
_GPU_NVLINK_COUNTERS = ("replay", "recovery", "crc")
_GPU_MIB = 1024 * 1024


def gpu_decode_throttle(mask):
    """The names of the clock-event reason bits set in ``mask`` (NVML's bit order)."""
    if mask is None:
        return []
    return [name for bit, name in GPU_THROTTLE_BITS if mask & bit]


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


# ---------------------------------------------------------------- nvidia-smi parsers


def _gpu_smi_value(raw):
    """A CSV cell, or None for ``[N/A]``, ``[Not Supported]``, ``[Unknown Error]``..."""
    value = raw.strip()
    if not value or value in ("N/A", "Unknown") or (value.startswith("[") and value.endswith("]")):
        return None
    return value


def _gpu_smi_convert(kind, value):
    if kind == "s":
        return value
    if kind == "i":
        return int(float(value))
    if kind == "f":
        return float(value)
    if kind == "mib":
        return int(float(value)) * _GPU_MIB
    if kind == "hex":
        return int(value, 16)
    if kind == "c":
        return int(value)
    if kind == "b":
        low = value.lower()
        if low in ("yes", "true", "1", "active", "enabled"):
            return True
        if low in ("no", "false", "0", "not active", "disabled"):
            return False
        raise ValueError(value)
    raise ValueError(kind)


_GPU_SMI_LOST = re.compile(
    r"Unable to determine the device handle for (?:GPU|gpu)\s*([0-9A-Fa-f:.]+):\s*(.*)"
)


def smi_parse_query_csv(text, fields=SMI_QUERY_FIELDS):
    """Readings from ``nvidia-smi --query-gpu=<fields> --format=csv,noheader,nounits``.

    Cells nvidia-smi cannot fill (``[N/A]``, ``[Not Supported]``) put the reading's
    group in ``unsupported``. A line saying a device handle could not be determined (a
    GPU fallen off the bus) gives a reading with ``lost`` set.
    """
    readings = []
    for line in text.splitlines():
        if not line.strip():
            continue
        lost = _GPU_SMI_LOST.search(line)
        if lost:
            reading = gpu_new_reading()
            reading["pci_bus_id"] = lost.group(1)
            reading["lost"] = True
            reading["errors"]["handle"] = lost.group(2).strip()
            readings.append(reading)
            continue
        cells = [c.strip() for c in line.split(", ")]
        if len(cells) != len(fields):
            # a name with ", " in it: rejoin the surplus into the name cell
            extra = len(cells) - len(fields)
            if extra > 0 and "name" in fields:
                at = fields.index("name")
                cells[at : at + extra + 1] = [", ".join(cells[at : at + extra + 1])]
            if len(cells) != len(fields):
                continue
        reading = gpu_new_reading()
        for field, cell in zip(fields, cells):  # noqa: B905 (strict= is 3.10+)
            kind, key = _GPU_SMI_FIELD_MAP.get(field, ("s", field))
            value = _gpu_smi_value(cell)
            if cell.strip() == "[GPU is lost]":
                reading["lost"] = True
            if value is None:
                reading["unsupported"].add(_GPU_GROUP.get(key, key))
                continue
            try:
                converted = _gpu_smi_convert(kind, value)
            except ValueError:
                reading["errors"][key] = f"unparsable {value!r}"
                continue
            if kind == "c":
                reading["counters"][key] = converted
            elif kind == "b":
                reading["flags"][key] = converted
            else:
                reading[key] = converted
        readings.append(reading)
    return readings


_GPU_SMI_GPU_HEADER = re.compile(r"^GPU (\d+):.*?(?:\(UUID: ([^)]+)\))?\s*$")
_GPU_SMI_LINK_COUNTER = re.compile(r"^\s*Link (\d+): ([A-Za-z ]+?):\s*(\d+)\s*$")
_GPU_SMI_LINK_STATUS = re.compile(r"^\s*Link (\d+): (.+?)\s*$")
_GPU_SMI_NVLINK_NAMES = {
    "replay errors": "replay",
    "recovery errors": "recovery",
    "crc errors": "crc",
    "crc flit errors": "crc",
    "crc data errors": "crc",
}


def _gpu_smi_link_lines(text, pattern, out):
    """``nvidia-smi nvlink`` output: (the current GPU's dict in ``out``, link line match).

    A ``GPU N: ...`` header starts GPU N's dict; link lines before any header are skipped.
    """
    gpu = None
    for line in text.splitlines():
        header = _GPU_SMI_GPU_HEADER.match(line)
        if header:
            gpu = out.setdefault(int(header.group(1)), {})
            continue
        match = pattern.match(line)
        if gpu is not None and match:
            yield gpu, match


def smi_parse_nvlink_errors(text):
    """``nvidia-smi nvlink -e``: ``{gpu index: {link: {"replay", "recovery", "crc"}}}``.

    Older drivers split CRC errors into flit and data counters; they are summed.
    """
    out = {}
    for gpu, match in _gpu_smi_link_lines(text, _GPU_SMI_LINK_COUNTER, out):
        name = _GPU_SMI_NVLINK_NAMES.get(match.group(2).strip().lower())
        if name is None:
            continue
        link = gpu.setdefault(int(match.group(1)), {})
        link[name] = link.get(name, 0) + int(match.group(3))
    return out


def smi_parse_nvlink_status(text):
    """``nvidia-smi nvlink -s``: ``{gpu index: {link: active}}`` (a speed means active)."""
    out = {}
    for gpu, match in _gpu_smi_link_lines(text, _GPU_SMI_LINK_STATUS, out):
        state = match.group(2).lower()
        gpu[int(match.group(1))] = not ("inactive" in state or "down" in state)
    return out


_GPU_SMI_Q_GPU = re.compile(r"^GPU ([0-9A-Fa-f]+:[0-9A-Fa-f]+:[0-9A-Fa-f]+\.[0-9A-Fa-f])\s*$")
_GPU_SMI_Q_REPLAYS = re.compile(r"^\s*Replays Since Reset\s*:\s*(\S+)", re.IGNORECASE)


def smi_parse_q_replays(text):
    """PCIe replay counters from ``nvidia-smi -q``: ``{pci key: replays since reset}``."""
    out = {}
    key = None
    for line in text.splitlines():
        header = _GPU_SMI_Q_GPU.match(line)
        if header:
            key = gpu_pci_key(header.group(1))
            continue
        match = _GPU_SMI_Q_REPLAYS.match(line)
        if key is not None and match and match.group(1).isdigit():
            out[key] = int(match.group(1))
    return out


# NVRM: Xid (PCI:0000:2b:00): 79, pid=..., name=..., GPU has fallen off the bus.
_GPU_XID_LINE = re.compile(
    r"NVRM: Xid \((?:PCI:)?([0-9A-Fa-f]+:[0-9A-Fa-f]+:[0-9A-Fa-f]+)\): (\d+),\s*(.*)"
)


def smi_parse_xid_lines(text):
    """XID reports in kernel log text (``dmesg``, ``journalctl -k`` or ``/dev/kmsg``).

    Returns ``[{"pci": "0000:2b:00", "code": 79, "text": "..."}]`` in log order.
    """
    out = []
    for line in text.splitlines():
        match = _GPU_XID_LINE.search(line)
        if match:
            out.append(
                {
                    "pci": gpu_pci_key(match.group(1)),
                    "code": int(match.group(2)),
                    "text": match.group(3).strip()[:200],
                }
            )
    return out


def smi_readings(query_csv, fields=SMI_QUERY_FIELDS, nvlink_e="", nvlink_s="", q_text=""):
    """Readings of every GPU from the texts of one round of nvidia-smi commands."""
    readings = smi_parse_query_csv(query_csv, fields)
    errors = smi_parse_nvlink_errors(nvlink_e)
    status = smi_parse_nvlink_status(nvlink_s)
    replays = smi_parse_q_replays(q_text)
    for reading in readings:
        if reading["lost"]:
            continue
        index = reading["index"]
        links = {}
        for link, active in status.get(index, {}).items():
            links.setdefault(link, {})["active"] = active
        for link, counters in errors.get(index, {}).items():
            links.setdefault(link, {}).update(counters)
        if links:
            for link in links.values():
                link.setdefault("active", None)
            reading["nvlink"] = links
        else:
            reading["unsupported"].add("nvlink")
        key = gpu_pci_key(reading["pci_bus_id"])
        if key in replays:
            reading["counters"]["pcie_replay"] = replays[key]
        else:
            reading["unsupported"].add("pcie_replay")
    return readings


# ---------------------------------------------------------------- record building


def _gpu_counter(before, after):
    if after is None:
        return None
    delta = after - before if before is not None and after >= before else None
    return {"total": after, "delta": delta}


def _gpu_match(readings, reading):
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
        base = _gpu_match(before, reading) or gpu_new_reading()
        counters, flags = reading["counters"], reading["flags"]
        bc = base["counters"]
        gpu = {}
        for key in ("index", "name", "uuid", "pci_bus_id"):  # a lost GPU keeps its identity
            gpu[key] = reading[key] if reading[key] is not None else base[key]
        for key in _GPU_GAUGES:
            gpu[key] = reading[key]
        gpu["throttle"] = gpu_decode_throttle(reading["throttle_mask"])
        gpu["throttle_mask"] = reading["throttle_mask"]
        gpu["ecc"] = {
            "uncorrected_volatile": _gpu_counter(
                bc.get("ecc.uncorrected_volatile"), counters.get("ecc.uncorrected_volatile")
            ),
            "corrected_volatile": _gpu_counter(
                bc.get("ecc.corrected_volatile"), counters.get("ecc.corrected_volatile")
            ),
        }
        gpu["retired_pages"] = {
            "sbe": _gpu_counter(bc.get("retired_pages.sbe"), counters.get("retired_pages.sbe")),
            "dbe": _gpu_counter(bc.get("retired_pages.dbe"), counters.get("retired_pages.dbe")),
            "pending": flags.get("retired_pages.pending"),
        }
        gpu["remapped_rows"] = {
            "correctable": _gpu_counter(
                bc.get("remapped_rows.correctable"), counters.get("remapped_rows.correctable")
            ),
            "uncorrectable": _gpu_counter(
                bc.get("remapped_rows.uncorrectable"), counters.get("remapped_rows.uncorrectable")
            ),
            "pending": flags.get("remapped_rows.pending"),
            "failure": flags.get("remapped_rows.failure"),
        }
        gpu["pcie_replay"] = _gpu_counter(bc.get("pcie_replay"), counters.get("pcie_replay"))
        links = []
        for link in sorted(reading["nvlink"]):
            now = reading["nvlink"][link]
            then = base["nvlink"].get(link, {})
            entry = {"link": link, "active": now.get("active")}
            for name in _GPU_NVLINK_COUNTERS:
                entry[name] = _gpu_counter(then.get(name), now.get(name))
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
        "v": GPU_RECORD_VERSION,
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


# ---------------------------------------------------------------- kernel log XIDs


class GpuKmsgXidWatch:
    """XID lines the kernel logs during the window, read from ``/dev/kmsg``.

    ``start()`` seeks to the end of the log; ``stop()`` reads what was logged since.
    Where the log cannot be read (``dmesg_restrict``, a container), ``supported`` is
    False and the readings list ``xid`` as unsupported.
    """

    def __init__(self, path="/dev/kmsg"):
        self.path = path
        self.fd = None
        self.supported = False

    def start(self):
        try:
            self.fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK)
            os.lseek(self.fd, 0, os.SEEK_END)
            self.supported = True
        except OSError:
            self.close()
            self.supported = False

    def stop(self):
        if self.fd is None:
            return []
        chunks = []
        try:
            while True:
                try:
                    chunk = os.read(self.fd, 65536)
                except BlockingIOError:
                    break
                except BrokenPipeError:  # records overwritten while we read: go on
                    continue
                if not chunk:
                    break
                chunks.append(chunk.decode("utf-8", "replace"))
        except OSError:
            pass
        finally:
            self.close()
        now = time.time_ns()
        events = smi_parse_xid_lines("".join(chunks))
        for event in events:
            event["t"] = now
        return events

    def close(self):
        if self.fd is not None:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = None


# ---------------------------------------------------------------- NVML


def _gpu_text(value):
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace").rstrip("\x00")
    return None if value is None else str(value)


class _GpuLost(Exception):
    pass


class _GpuNoGpu(Exception):
    """nvidia-smi says there is no GPU (or no driver) here."""


# What nvidia-smi prints where there is no GPU to speak of.
_GPU_SMI_NO_GPU = ("No devices were found", "couldn't communicate with the NVIDIA driver")


class _GpuNvmlCaller:
    """Calls NVML for one reading; unsupported calls go to ``unsupported``, others to
    ``errors``; a lost GPU raises ``_GpuLost``."""

    def __init__(self, nv, reading):
        self.nv = nv
        self.reading = reading
        self.error_class = getattr(nv, "NVMLError", ())

    def __call__(self, group, names, *args):
        """Call the first of ``names`` the module and the driver both have."""
        if isinstance(names, str):
            names = (names,)
        for name in names:
            fn = getattr(self.nv, name, None)
            if fn is None:
                continue  # an older pynvml: try the older spelling
            try:
                return fn(*args)
            except self.error_class as exc:
                code = getattr(exc, "value", None)
                if code == _GPU_NVML_ERROR_FUNCTION_NOT_FOUND:
                    continue  # an older driver: try the older spelling
                if code == _GPU_NVML_ERROR_NOT_SUPPORTED:
                    break
                if code == _GPU_NVML_ERROR_GPU_IS_LOST:
                    self.reading["lost"] = True
                    self.reading["errors"][group] = str(exc)
                    raise _GpuLost() from None
                self.reading["errors"][group] = str(exc)
                return None
        self.reading["unsupported"].add(group)
        return None


def _gpu_nvml_const(nv, name, default):
    value = getattr(nv, name, None)
    return default if value is None else value


def gpu_nvml_reading(nv, handle, index):
    """One GPU's reading through NVML (``nv`` is the pynvml module)."""
    reading = gpu_new_reading(index)
    call = _GpuNvmlCaller(nv, reading)
    with contextlib.suppress(_GpuLost):
        _gpu_nvml_fill(nv, call, handle, reading)
    return reading


def _gpu_nvml_fill(nv, call, h, r):
    const = lambda name, default: _gpu_nvml_const(nv, name, default)  # noqa: E731
    r["name"] = _gpu_text(call("name", "nvmlDeviceGetName", h))
    r["uuid"] = _gpu_text(call("uuid", "nvmlDeviceGetUUID", h))
    pci = call("pci_bus_id", "nvmlDeviceGetPciInfo", h)
    if pci is not None:
        r["pci_bus_id"] = _gpu_text(getattr(pci, "busId", None))
    util = call("util_pct", "nvmlDeviceGetUtilizationRates", h)
    if util is not None:
        r["util_pct"] = int(util.gpu)
    mem = call("mem_used_bytes", "nvmlDeviceGetMemoryInfo", h)
    if mem is not None:
        r["mem_used_bytes"] = int(mem.used)
        r["mem_total_bytes"] = int(mem.total)
    elif "mem_used_bytes" in r["unsupported"]:
        r["unsupported"].add("mem_total_bytes")
    temp = call("temp_c", "nvmlDeviceGetTemperature", h, const("NVML_TEMPERATURE_GPU", 0))
    r["temp_c"] = None if temp is None else int(temp)
    power_mw = call("power_w", "nvmlDeviceGetPowerUsage", h)
    r["power_w"] = None if power_mw is None else power_mw / 1000.0
    sm = call("sm_clock_mhz", "nvmlDeviceGetClockInfo", h, const("NVML_CLOCK_SM", 1))
    r["sm_clock_mhz"] = None if sm is None else int(sm)
    r["throttle_mask"] = call(
        "throttle",
        ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"),
        h,
    )
    volatile = const("NVML_VOLATILE_ECC", 0)
    for key, kind in (
        ("ecc.uncorrected_volatile", const("NVML_MEMORY_ERROR_TYPE_UNCORRECTED", 1)),
        ("ecc.corrected_volatile", const("NVML_MEMORY_ERROR_TYPE_CORRECTED", 0)),
    ):
        value = call("ecc", "nvmlDeviceGetTotalEccErrors", h, kind, volatile)
        if value is not None:
            r["counters"][key] = int(value)
    for key, cause in (
        (
            "retired_pages.sbe",
            const("NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS", 0),
        ),
        ("retired_pages.dbe", const("NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR", 1)),
    ):
        pages = call("retired_pages", "nvmlDeviceGetRetiredPages", h, cause)
        if pages is not None:
            r["counters"][key] = len(pages)
    pending = call("retired_pages", "nvmlDeviceGetRetiredPagesPendingStatus", h)
    if pending is not None:
        r["flags"]["retired_pages.pending"] = bool(pending)
    rows = call("remapped_rows", "nvmlDeviceGetRemappedRows", h)
    if rows is not None:
        corr, unc, pend, fail = rows
        r["counters"]["remapped_rows.correctable"] = int(corr)
        r["counters"]["remapped_rows.uncorrectable"] = int(unc)
        r["flags"]["remapped_rows.pending"] = bool(pend)
        r["flags"]["remapped_rows.failure"] = bool(fail)
    replay = call("pcie_replay", "nvmlDeviceGetPcieReplayCounter", h)
    if replay is not None:
        r["counters"]["pcie_replay"] = int(replay)
    _gpu_nvml_links(nv, call, h, r)


def _gpu_nvml_links(nv, call, h, r):
    """NVLink state and error counters, link by link until NVML says there are no more."""
    max_links = _gpu_nvml_const(nv, "NVML_NVLINK_MAX_LINKS", 18)
    kinds = (
        ("replay", _gpu_nvml_const(nv, "NVML_NVLINK_ERROR_DL_REPLAY", 0)),
        ("recovery", _gpu_nvml_const(nv, "NVML_NVLINK_ERROR_DL_RECOVERY", 1)),
        ("crc", _gpu_nvml_const(nv, "NVML_NVLINK_ERROR_DL_CRC_FLIT", 2)),
        ("crc", _gpu_nvml_const(nv, "NVML_NVLINK_ERROR_DL_CRC_DATA", 3)),
    )
    state_fn = getattr(nv, "nvmlDeviceGetNvLinkState", None)
    counter_fn = getattr(nv, "nvmlDeviceGetNvLinkErrorCounter", None)
    if state_fn is None or counter_fn is None:
        r["unsupported"].add("nvlink")
        return
    errors = getattr(nv, "NVMLError", ())
    other_error = None
    for link in range(max_links):  # a link can be missing in the middle: ask for them all
        try:
            active = bool(state_fn(h, link))
        except errors as exc:
            code = getattr(exc, "value", None)
            if code == _GPU_NVML_ERROR_GPU_IS_LOST:
                r["lost"] = True
                raise _GpuLost() from None
            if code not in _GPU_NVML_NO_LINK_ERRORS:
                other_error = str(exc)
            continue  # no such link on this GPU
        entry = {"active": active}
        if active:
            for name, counter in kinds:
                try:
                    value = int(counter_fn(h, link, counter))
                except errors:
                    continue  # e.g. no CRC-data counter on Hopper
                entry[name] = entry.get(name, 0) + value
        r["nvlink"][link] = entry
    if not r["nvlink"]:
        if other_error is None:
            r["unsupported"].add("nvlink")
        else:
            r["errors"]["nvlink"] = other_error


class _GpuNvmlXidWatch:
    """A thread that waits on an NVML event set for XID critical errors."""

    def __init__(self, nv, handles):
        self.nv = nv
        self.handles = handles  # [(index, handle)]
        self.events = []
        self.unsupported = set()  # indices that cannot deliver XID events
        self.event_set = None
        self.thread = None
        self.stopping = threading.Event()
        self.error = None

    def start(self):
        nv = self.nv
        errors = getattr(nv, "NVMLError", ())
        xid_bit = _gpu_nvml_const(nv, "nvmlEventTypeXidCriticalError", _GPU_XID_EVENT_BIT)
        try:
            self.event_set = nv.nvmlEventSetCreate()
        except (errors, AttributeError):
            self.unsupported = {index for index, _ in self.handles}
            return
        registered = 0
        for index, handle in self.handles:
            try:
                nv.nvmlDeviceRegisterEvents(handle, xid_bit, self.event_set)
                registered += 1
            except (errors, AttributeError):
                self.unsupported.add(index)
        if registered:
            self.thread = threading.Thread(target=self._run, name="cwctl-gpu-xid", daemon=True)
            self.thread.start()

    def _index_of(self, device):
        try:
            return int(self.nv.nvmlDeviceGetIndex(device))
        except Exception:
            return None

    def _run(self):
        nv = self.nv
        errors = getattr(nv, "NVMLError", ())
        wait = getattr(nv, "nvmlEventSetWait_v2", None) or nv.nvmlEventSetWait
        xid_bit = _gpu_nvml_const(nv, "nvmlEventTypeXidCriticalError", _GPU_XID_EVENT_BIT)
        while not self.stopping.is_set():
            try:
                data = wait(self.event_set, _GPU_EVENT_WAIT_MS)
            except errors as exc:
                if getattr(exc, "value", None) == _GPU_NVML_ERROR_TIMEOUT:
                    continue
                self.error = str(exc)
                return
            if int(data.eventType) & xid_bit:
                self.events.append(
                    {
                        "index": self._index_of(data.device),
                        "code": int(data.eventData),
                        "t": time.time_ns(),
                        "text": None,
                    }
                )

    def stop(self):
        self.stopping.set()
        if self.thread is not None:
            self.thread.join(_GPU_EVENT_WAIT_MS / 1000.0 * 4)
        if self.event_set is not None and (self.thread is None or not self.thread.is_alive()):
            with contextlib.suppress(Exception):
                self.nv.nvmlEventSetFree(self.event_set)
        return list(self.events)


# ---------------------------------------------------------------- the sampler


class GpuSampler:
    """Samples the host's GPUs over a window: ``start()`` then ``stop() -> [gpu record]``.

    ``pynvml``: the module to use (default: import it if possible; ``False``: don't).
    ``nvidia_smi``: the path of nvidia-smi (default: look it up on the PATH; ``False``:
    don't). ``kmsg``: where kernel log lines with XIDs are read on the nvidia-smi path.
    Neither ``start()`` nor ``stop()`` raises: what goes wrong ends up in the record.
    """

    def __init__(self, host, nvidia_smi=None, pynvml=None, kmsg="/dev/kmsg"):
        self.host = host
        self.nvidia_smi = nvidia_smi
        self.pynvml = pynvml
        self.kmsg = kmsg
        self.source = None
        self.status = None
        self.error = None
        self.driver = None
        self.t_start_ns = None
        self.before = []
        self.handles = []
        self.fields = None
        self.xid_watch = None
        self.kmsg_watch = None  # the NVML path's fallback for GPUs without XID events

    # -- choosing a source

    def _choose(self):
        nv = self.pynvml
        if nv is None:
            try:
                import pynvml as nv
            except Exception:
                nv = False
        tried_nvml = nv is not False
        if tried_nvml:
            self._init_nvml(nv)
            if self.status is not None:
                return
        smi = self.nvidia_smi
        if smi is None:
            smi = shutil.which("nvidia-smi") or False
        if smi is not False:
            self.nvidia_smi = smi
            self.source = "nvidia-smi"
            return
        self.source = "nvml" if tried_nvml else "none"
        self.status = "no-gpu"

    def _init_nvml(self, nv):
        errors = getattr(nv, "NVMLError", ())
        try:
            nv.nvmlInit()
        except errors as exc:
            if getattr(exc, "value", None) in _GPU_NVML_NO_GPU_ERRORS:
                self.error = f"nvmlInit: {exc}"  # kept as the record's "warning"
                return  # no driver here: nvidia-smi would fail alike, but let it say so
            self.source, self.status, self.error = "nvml", "error", f"nvmlInit: {exc}"
            return
        self.pynvml = nv
        self.source = "nvml"
        try:
            self.driver = _gpu_text(nv.nvmlSystemGetDriverVersion())
        except Exception:
            self.driver = None
        try:
            count = int(nv.nvmlDeviceGetCount())
        except errors as exc:
            self.status, self.error = "error", f"nvmlDeviceGetCount: {exc}"
            return
        if count == 0:
            self.status = "no-gpu"
            return
        self.status = "ok"
        self.handles = []
        for index in range(count):
            try:
                self.handles.append((index, nv.nvmlDeviceGetHandleByIndex(index)))
            except errors as exc:
                self.handles.append((index, None))
                self.error = f"GPU {index}: {exc}"

    # -- readings

    def _read(self):
        if self.source == "nvml":
            return self._read_nvml()
        if self.source == "nvidia-smi":
            return self._read_smi()
        return []

    def _read_nvml(self):
        readings = []
        for index, handle in self.handles:
            if handle is None:
                reading = gpu_new_reading(index)
                reading["lost"] = True
                reading["errors"]["handle"] = "nvmlDeviceGetHandleByIndex failed"
                readings.append(reading)
                continue
            readings.append(gpu_nvml_reading(self.pynvml, handle, index))
        return readings

    def _run_smi(self, args):
        """Start nvidia-smi with ``args``; the caller collects it with ``_collect``."""
        return subprocess.Popen(
            [self.nvidia_smi, *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
        )

    def _collect(self, proc):
        try:
            out, err = proc.communicate(timeout=_GPU_SMI_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            return None, "timed out"
        return out.decode("utf-8", "replace"), err.decode("utf-8", "replace")

    def _read_smi(self):
        """One round of nvidia-smi commands, run side by side."""
        field_sets = (self.fields,) if self.fields else SMI_QUERY_FIELD_SETS
        procs = {
            "e": self._run_smi(["nvlink", "-e"]),
            "s": self._run_smi(["nvlink", "-s"]),
            "q": self._run_smi(["-q"]),
        }
        query_out, last_err = None, ""
        for fields in field_sets:
            proc = self._run_smi(
                ["--query-gpu=" + ",".join(fields), "--format=csv,noheader,nounits"]
            )
            out, err = self._collect(proc)
            if out is not None and proc.returncode == 0:
                query_out, self.fields = out, fields
                break
            # A lost GPU makes nvidia-smi fail, but the other GPUs' lines are a reading.
            lost = [ln for ln in (err or "").splitlines() if _GPU_SMI_LOST.search(ln)]
            if out is not None and (lost or _GPU_SMI_LOST.search(out)):
                query_out, self.fields = "\n".join([out, *lost]), fields
                break
            last_err = (err or out or "").strip().splitlines()[-1:] or [f"exit {proc.returncode}"]
            last_err = last_err[0]
        texts = {}
        for key, proc in procs.items():
            out, _ = self._collect(proc)
            texts[key] = out if out is not None and proc.returncode == 0 else ""
        if query_out is None:
            if any(s in last_err for s in _GPU_SMI_NO_GPU):
                raise _GpuNoGpu(last_err)
            raise RuntimeError(f"nvidia-smi --query-gpu failed: {last_err}")
        return smi_readings(query_out, self.fields, texts["e"], texts["s"], texts["q"])

    # -- the window

    def start(self):
        """Baseline every counter and start watching for XID events. Never raises."""
        self.t_start_ns = time.time_ns()
        try:
            self._choose()
            if self.status in ("no-gpu", "error"):
                return
            self.before = self._read()
            if self.source == "nvml":
                live = [(i, h) for i, h in self.handles if h is not None]
                self.xid_watch = _GpuNvmlXidWatch(self.pynvml, live)
                self.xid_watch.start()
                if self.xid_watch.unsupported or self.xid_watch.thread is None:
                    # GPUs NVML cannot deliver events for: read their XIDs from the log
                    self.kmsg_watch = GpuKmsgXidWatch(self.kmsg)
                    self.kmsg_watch.start()
            else:
                self.xid_watch = GpuKmsgXidWatch(self.kmsg)
                self.xid_watch.start()
        except _GpuNoGpu as exc:
            self.status, self.error = "no-gpu", f"nvidia-smi: {exc}"
        except Exception as exc:
            self.status, self.error = "error", f"{type(exc).__name__}: {exc}"

    def stop(self):
        """The final reading, as ``gpu`` records (deltas since ``start()``). Never raises."""
        if self.source is None:  # stop() without start(): one reading, no deltas
            self.start()
            self.before = []
        gpus, xids = [], []
        try:
            if self.xid_watch is not None:
                xids = self.xid_watch.stop()
                if getattr(self.xid_watch, "error", None) and not self.error:
                    self.error = f"XID event wait stopped: {self.xid_watch.error}"
            if self.status not in ("no-gpu", "error") or (self.status == "error" and self.before):
                after = self._read()
                xids = xids + self._log_xids_of_blind_gpus(after)
                gpus = gpu_build(self.before, after, xids)
                if self.status is None:
                    self.status = "ok"
                self._mark_xid_unsupported(gpus)
        except _GpuNoGpu as exc:
            self.status, self.error = "no-gpu", f"nvidia-smi: {exc}"
        except Exception as exc:
            self.status, self.error = "error", f"{type(exc).__name__}: {exc}"
        finally:
            self._shutdown()
        status = self.status or "error"
        if status == "ok" and not gpus:
            status = "no-gpu"
        error = self.error if status == "error" else None
        rec = gpu_record(
            self.host,
            self.source or "none",
            status,
            gpus,
            time.time_ns(),
            self.t_start_ns,
            error=error,
            driver=self.driver,
        )
        if status != "error" and self.error:
            rec["warning"] = self.error
        return [rec]

    def _nvml_blind(self, index):
        """True when NVML delivers no XID events for GPU ``index``."""
        watch = self.xid_watch
        return index in watch.unsupported or watch.thread is None

    def _log_xids_of_blind_gpus(self, after):
        """XIDs from the kernel log for the GPUs NVML delivers no events for."""
        if self.kmsg_watch is None:
            return []
        events = self.kmsg_watch.stop()
        readings = list(self.before) + list(after)
        seen = {gpu_pci_key(r["pci_bus_id"]) for r in readings}
        blind = {gpu_pci_key(r["pci_bus_id"]) for r in readings if self._nvml_blind(r["index"])}
        return [e for e in events if e["pci"] in blind or e["pci"] not in seen]

    def _mark_xid_unsupported(self, gpus):
        watch = self.xid_watch
        for gpu in gpus:
            if watch is None:
                blind = True
            elif isinstance(watch, GpuKmsgXidWatch):
                blind = not watch.supported
            else:
                blind = self._nvml_blind(gpu["index"])
                if blind and self.kmsg_watch is not None:
                    blind = not self.kmsg_watch.supported
            if blind and "xid" not in gpu["unsupported"]:
                gpu["unsupported"] = sorted([*gpu["unsupported"], "xid"])

    def _shutdown(self):
        if self.kmsg_watch is not None:
            self.kmsg_watch.close()
        if self.source == "nvml" and self.pynvml not in (None, False):
            with contextlib.suppress(Exception):
                self.pynvml.nvmlShutdown()
