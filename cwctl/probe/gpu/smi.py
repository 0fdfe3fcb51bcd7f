"""Parsers of nvidia-smi output: ``--query-gpu`` CSV, ``nvlink -e/-s``, ``-q`` replays.

Part of the agent bundle: standard library only, Python 3.8+ syntax, no annotations.
"""

import re

from cwctl.probe.gpu.readings import GROUP, MIB, gpu_new_reading, gpu_pci_key

SMI_TIMEOUT_S = 15.0
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
_SMI_FIELD_MAP = {
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


def _smi_value(raw):
    """A CSV cell, or None for ``[N/A]``, ``[Not Supported]``, ``[Unknown Error]``..."""
    value = raw.strip()
    if not value or value in ("N/A", "Unknown") or (value.startswith("[") and value.endswith("]")):
        return None
    return value


def _smi_convert(kind, value):
    if kind == "s":
        return value
    if kind == "i":
        return int(float(value))
    if kind == "f":
        return float(value)
    if kind == "mib":
        return int(float(value)) * MIB
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


SMI_LOST = re.compile(
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
        lost = SMI_LOST.search(line)
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
            kind, key = _SMI_FIELD_MAP.get(field, ("s", field))
            value = _smi_value(cell)
            if cell.strip() == "[GPU is lost]":
                reading["lost"] = True
            if value is None:
                reading["unsupported"].add(GROUP.get(key, key))
                continue
            try:
                converted = _smi_convert(kind, value)
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


_SMI_HEADER = re.compile(r"^GPU (\d+):.*?(?:\(UUID: ([^)]+)\))?\s*$")
_SMI_LINK_COUNTER = re.compile(r"^\s*Link (\d+): ([A-Za-z ]+?):\s*(\d+)\s*$")
_SMI_LINK_STATUS = re.compile(r"^\s*Link (\d+): (.+?)\s*$")
_SMI_NVLINK_NAMES = {
    "replay errors": "replay",
    "recovery errors": "recovery",
    "crc errors": "crc",
    "crc flit errors": "crc",
    "crc data errors": "crc",
}


def _smi_link_lines(text, pattern, out):
    """``nvidia-smi nvlink`` output: (the current GPU's dict in ``out``, link line match).

    A ``GPU N: ...`` header starts GPU N's dict; link lines before any header are skipped.
    """
    gpu = None
    for line in text.splitlines():
        header = _SMI_HEADER.match(line)
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
    for gpu, match in _smi_link_lines(text, _SMI_LINK_COUNTER, out):
        name = _SMI_NVLINK_NAMES.get(match.group(2).strip().lower())
        if name is None:
            continue
        link = gpu.setdefault(int(match.group(1)), {})
        link[name] = link.get(name, 0) + int(match.group(3))
    return out


def smi_parse_nvlink_status(text):
    """``nvidia-smi nvlink -s``: ``{gpu index: {link: active}}`` (a speed means active)."""
    out = {}
    for gpu, match in _smi_link_lines(text, _SMI_LINK_STATUS, out):
        state = match.group(2).lower()
        gpu[int(match.group(1))] = not ("inactive" in state or "down" in state)
    return out


_SMI_Q_GPU = re.compile(r"^GPU ([0-9A-Fa-f]+:[0-9A-Fa-f]+:[0-9A-Fa-f]+\.[0-9A-Fa-f])\s*$")
_SMI_Q_REPLAYS = re.compile(r"^\s*Replays Since Reset\s*:\s*(\S+)", re.IGNORECASE)


def smi_parse_q_replays(text):
    """PCIe replay counters from ``nvidia-smi -q``: ``{pci key: replays since reset}``."""
    out = {}
    key = None
    for line in text.splitlines():
        header = _SMI_Q_GPU.match(line)
        if header:
            key = gpu_pci_key(header.group(1))
            continue
        match = _SMI_Q_REPLAYS.match(line)
        if key is not None and match and match.group(1).isdigit():
            out[key] = int(match.group(1))
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


class NoGpu(Exception):
    """nvidia-smi says there is no GPU (or no driver) here."""


# What nvidia-smi prints where there is no GPU to speak of.
SMI_NO_GPU = ("No devices were found", "couldn't communicate with the NVIDIA driver")
