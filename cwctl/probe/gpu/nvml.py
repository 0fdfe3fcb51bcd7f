"""Readings and XID events of the host's GPUs through NVML (pynvml).

Part of the agent bundle: standard library only, Python 3.8+ syntax, no annotations.
"""

import contextlib
import threading
import time

from cwctl.probe.gpu.readings import gpu_new_reading

# NVML constants, by value, for a pynvml too old to define them all.
_NVML_ERROR_NOT_SUPPORTED = 3
_NVML_ERROR_INVALID_ARGUMENT = 2
_NVML_ERROR_DRIVER_NOT_LOADED = 9
_NVML_ERROR_TIMEOUT = 10
_NVML_ERROR_LIBRARY_NOT_FOUND = 12
_NVML_ERROR_FUNCTION_NOT_FOUND = 13
_NVML_ERROR_IS_LOST = 15
NVML_NO_GPU_ERRORS = (_NVML_ERROR_LIBRARY_NOT_FOUND, _NVML_ERROR_DRIVER_NOT_LOADED)
_NVML_UNSUPPORTED_ERRORS = (_NVML_ERROR_NOT_SUPPORTED, _NVML_ERROR_FUNCTION_NOT_FOUND)
_NVML_NO_LINK_ERRORS = (*_NVML_UNSUPPORTED_ERRORS, _NVML_ERROR_INVALID_ARGUMENT)
_XID_EVENT_BIT = 0x8  # nvmlEventTypeXidCriticalError
_EVENT_WAIT_MS = 250  # how long one nvmlEventSetWait blocks; bounds stop()'s latency


def nvml_text(value):
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace").rstrip("\x00")
    return None if value is None else str(value)


class _Lost(Exception):
    pass


class _NvmlCaller:
    """Calls NVML for one reading; unsupported calls go to ``unsupported``, others to
    ``errors``; a lost GPU raises ``_Lost``."""

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
                if code == _NVML_ERROR_FUNCTION_NOT_FOUND:
                    continue  # an older driver: try the older spelling
                if code == _NVML_ERROR_NOT_SUPPORTED:
                    break
                if code == _NVML_ERROR_IS_LOST:
                    self.reading["lost"] = True
                    self.reading["errors"][group] = str(exc)
                    raise _Lost() from None
                self.reading["errors"][group] = str(exc)
                return None
        self.reading["unsupported"].add(group)
        return None


def _nvml_const(nv, name, default):
    value = getattr(nv, name, None)
    return default if value is None else value


def gpu_nvml_reading(nv, handle, index):
    """One GPU's reading through NVML (``nv`` is the pynvml module)."""
    reading = gpu_new_reading(index)
    call = _NvmlCaller(nv, reading)
    with contextlib.suppress(_Lost):
        _nvml_fill(nv, call, handle, reading)
    return reading


def _nvml_fill(nv, call, h, r):
    const = lambda name, default: _nvml_const(nv, name, default)  # noqa: E731
    r["name"] = nvml_text(call("name", "nvmlDeviceGetName", h))
    r["uuid"] = nvml_text(call("uuid", "nvmlDeviceGetUUID", h))
    pci = call("pci_bus_id", "nvmlDeviceGetPciInfo", h)
    if pci is not None:
        r["pci_bus_id"] = nvml_text(getattr(pci, "busId", None))
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
    _nvml_links(nv, call, h, r)


def _nvml_links(nv, call, h, r):
    """NVLink state and error counters, link by link until NVML says there are no more."""
    max_links = _nvml_const(nv, "NVML_NVLINK_MAX_LINKS", 18)
    kinds = (
        ("replay", _nvml_const(nv, "NVML_NVLINK_ERROR_DL_REPLAY", 0)),
        ("recovery", _nvml_const(nv, "NVML_NVLINK_ERROR_DL_RECOVERY", 1)),
        ("crc", _nvml_const(nv, "NVML_NVLINK_ERROR_DL_CRC_FLIT", 2)),
        ("crc", _nvml_const(nv, "NVML_NVLINK_ERROR_DL_CRC_DATA", 3)),
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
            if code == _NVML_ERROR_IS_LOST:
                r["lost"] = True
                raise _Lost() from None
            if code not in _NVML_NO_LINK_ERRORS:
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


class NvmlXidWatch:
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
        xid_bit = _nvml_const(nv, "nvmlEventTypeXidCriticalError", _XID_EVENT_BIT)
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
        xid_bit = _nvml_const(nv, "nvmlEventTypeXidCriticalError", _XID_EVENT_BIT)
        while not self.stopping.is_set():
            try:
                data = wait(self.event_set, _EVENT_WAIT_MS)
            except errors as exc:
                if getattr(exc, "value", None) == _NVML_ERROR_TIMEOUT:
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
            self.thread.join(_EVENT_WAIT_MS / 1000.0 * 4)
        if self.event_set is not None and (self.thread is None or not self.thread.is_alive()):
            with contextlib.suppress(Exception):
                self.nv.nvmlEventSetFree(self.event_set)
        return list(self.events)
