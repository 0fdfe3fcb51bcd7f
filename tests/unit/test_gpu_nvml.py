"""The NVML path of the GPU sampler.

This machine has no GPU, so three kinds of test:

- the real nvidia-ml-py library, where NVML cannot load: the sampler says "no GPU";
- ``StandInNvml``, a small stand-in for the pynvml module, ONLY to exercise how the
  sampler handles calls a GPU does not support, a GPU that is lost, and XID events
  (it is not a model of NVML, and says nothing about the real library's behaviour);
- ``@pytest.mark.gpu``: the real NVML path, run where a GPU is present, skipped here.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pynvml
import pytest

from cwctl.gpu import assess
from cwctl.probe.gpu.readings import gpu_pci_key
from cwctl.probe.gpu.sampler import GpuSampler
from cwctl.records import encode_line, parse_line


def _nvml_loads() -> str | None:
    """None where NVML initialises (a GPU and driver exist), else why not."""
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        return f"nvmlInit raised {type(exc).__name__}: {exc}"
    pynvml.nvmlShutdown()
    return None


NO_NVML = _nvml_loads()


# ---------------------------------------------------------------- the real library


@pytest.mark.skipif(NO_NVML is None, reason="a GPU is present: the no-GPU path cannot be seen")
def test_real_pynvml_without_a_gpu_reports_no_gpu_cleanly() -> None:
    with pytest.raises((pynvml.NVMLError_LibraryNotFound, pynvml.NVMLError_DriverNotLoaded)):
        pynvml.nvmlInit()
    sampler = GpuSampler("gpu-001", pynvml=pynvml, nvidia_smi=False)
    sampler.start()
    (rec,) = sampler.stop()
    assert parse_line(encode_line(rec)) == rec
    assert (rec["source"], rec["status"], rec["gpus"]) == ("nvml", "no-gpu", [])
    assert "error" not in rec
    assert rec["warning"].startswith("nvmlInit: ")
    assert assess([rec]).verdict == "none"


@pytest.mark.gpu
def test_real_nvml_path_populates_every_field() -> None:
    if NO_NVML is not None:
        pytest.skip(f"no NVIDIA GPU here: {NO_NVML}")
    pynvml.nvmlInit()
    count = pynvml.nvmlDeviceGetCount()
    pynvml.nvmlShutdown()
    sampler = GpuSampler("gpu-001", pynvml=pynvml, nvidia_smi=False)
    sampler.start()
    time.sleep(0.5)
    (rec,) = sampler.stop()
    json.loads(encode_line(rec))
    assert (rec["source"], rec["status"]) == ("nvml", "ok"), rec.get("error")
    assert rec["driver"]
    assert len(rec["gpus"]) == count
    for gpu in rec["gpus"]:
        assert gpu["name"] and gpu["uuid"].startswith(("GPU-", "MIG-"))
        assert gpu_pci_key(gpu["pci_bus_id"]) is not None
        assert gpu["errors"] == {}, gpu["errors"]
        assert gpu["lost"] is False
        for key in ("util_pct", "mem_used_bytes", "mem_total_bytes", "temp_c", "sm_clock_mhz"):
            assert gpu[key] is not None or key in gpu["unsupported"], key
        assert gpu["mem_total_bytes"] > 0
        assert isinstance(gpu["throttle"], list)
        for group, counter in (("ecc", gpu["ecc"]["uncorrected_volatile"]),):
            if group not in gpu["unsupported"]:
                assert counter["total"] >= 0 and counter["delta"] >= 0
        if "pcie_replay" not in gpu["unsupported"]:
            assert gpu["pcie_replay"]["delta"] >= 0
        for link in gpu["nvlink"]:
            assert isinstance(link["active"], bool)
    health = assess([rec])
    assert health.verdict in ("ok", "warn", "fail")
    assert len(health.gpus) == count


# ---------------------------------------------------------------- the stand-in


class _StandInError(Exception):
    def __init__(self, value: int) -> None:
        super().__init__(value)
        self.value = value

    def __str__(self) -> str:
        return {3: "Not Supported", 4: "Insufficient Permissions", 15: "GPU is lost"}.get(
            self.value, f"NVML error {self.value}"
        )


class StandInNvml:
    """A stand-in for the pynvml module (no GPU here): two GPUs.

    GPU 0 supports everything, has 4 NVLinks (link 2's CRC counter rises between
    readings) and delivers one XID event. GPU 1 is a PCIe card on an old driver: no
    ECC, no page retirement, no row remapping, no NVLink, no events, no
    ``nvmlDeviceGetCurrentClocksEventReasons`` (FunctionNotFound), and reading its power
    is not permitted. ``lose`` makes GPU 1 lost from the next reading on.
    """

    NVMLError = _StandInError
    NVML_NVLINK_MAX_LINKS = 18
    nvmlEventTypeXidCriticalError = 0x8

    def __init__(self, xid: int = 74) -> None:
        self.reads = 0
        self.xid = xid
        self.xid_delivered = threading.Event()
        self.lose = False
        self.calls: list[str] = []

    def _gpu1_only(self, h: int, what: int = 3) -> None:
        if h == 1:
            raise _StandInError(15 if self.lose else what)

    def nvmlInit(self) -> None:
        self.calls.append("init")

    def nvmlShutdown(self) -> None:
        self.calls.append("shutdown")

    def nvmlSystemGetDriverVersion(self) -> str:
        return "550.54.15"

    def nvmlDeviceGetCount(self) -> int:
        return 2

    def nvmlDeviceGetHandleByIndex(self, i: int) -> int:
        return i

    def nvmlDeviceGetIndex(self, h: int) -> int:
        return h

    def nvmlDeviceGetName(self, h: int) -> str:
        if h == 1 and self.lose:
            raise _StandInError(15)
        self.reads += h == 0
        return ["NVIDIA H100 80GB HBM3", "NVIDIA L4"][h]

    def nvmlDeviceGetUUID(self, h: int) -> str:
        return f"GPU-0000000{h}-aaaa-bbbb-cccc-dddddddddddd"

    def nvmlDeviceGetPciInfo(self, h: int) -> Any:
        return SimpleNamespace(busId=[b"00000000:1B:00.0", b"00000000:3B:00.0"][h])

    def nvmlDeviceGetUtilizationRates(self, h: int) -> Any:
        return SimpleNamespace(gpu=97, memory=41)

    def nvmlDeviceGetMemoryInfo(self, h: int) -> Any:
        return SimpleNamespace(total=85520809984, used=74724671488, free=10796138496)

    def nvmlDeviceGetTemperature(self, h: int, sensor: int) -> int:
        return 61

    def nvmlDeviceGetPowerUsage(self, h: int) -> int:
        self._gpu1_only(h, 4)
        return 612370

    def nvmlDeviceGetClockInfo(self, h: int, kind: int) -> int:
        return 1980

    def nvmlDeviceGetCurrentClocksEventReasons(self, h: int) -> int:
        self._gpu1_only(h, 13)
        return 0x8

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, h: int) -> int:
        return 0x1

    def nvmlDeviceGetTotalEccErrors(self, h: int, kind: int, counter: int) -> int:
        self._gpu1_only(h)
        return 0

    def nvmlDeviceGetRetiredPages(self, h: int, cause: int) -> list[int]:
        raise _StandInError(3)  # H100 remaps rows instead

    def nvmlDeviceGetRetiredPagesPendingStatus(self, h: int) -> int:
        raise _StandInError(3)

    def nvmlDeviceGetRemappedRows(self, h: int) -> tuple[int, int, int, int]:
        self._gpu1_only(h)
        return (0, 0, 0, 0)

    def nvmlDeviceGetPcieReplayCounter(self, h: int) -> int:
        return 5

    def nvmlDeviceGetNvLinkState(self, h: int, link: int) -> int:
        self._gpu1_only(h)
        if link >= 4:
            raise _StandInError(2)  # invalid argument: past the last link
        return 1

    def nvmlDeviceGetNvLinkErrorCounter(self, h: int, link: int, counter: int) -> int:
        if counter == 3:
            raise _StandInError(3)  # CRC data counter: gone on Hopper
        if link == 2 and counter == 2:
            return 10 + 5 * self.reads
        return 0

    def nvmlEventSetCreate(self) -> str:
        return "event-set"

    def nvmlDeviceRegisterEvents(self, h: int, types: int, event_set: str) -> None:
        self._gpu1_only(h)

    def nvmlEventSetWait_v2(self, event_set: str, timeout_ms: int) -> Any:
        if not self.xid_delivered.is_set():
            self.xid_delivered.set()
            return SimpleNamespace(device=0, eventType=0x8, eventData=self.xid)
        time.sleep(timeout_ms / 1000 / 10)
        raise _StandInError(10)  # timeout

    def nvmlEventSetFree(self, event_set: str) -> None:
        self.calls.append("free")


def test_stand_in_unsupported_calls_are_recorded_as_unsupported_not_failures(
    tmp_path: Path,
) -> None:
    nv = StandInNvml()
    no_log = str(tmp_path / "no-kmsg")  # and no kernel log to fall back on for XIDs
    sampler = GpuSampler("gpu-001", pynvml=nv, nvidia_smi=False, kmsg=no_log)
    sampler.start()
    assert nv.xid_delivered.wait(2.0)
    (rec,) = sampler.stop()
    assert parse_line(encode_line(rec)) == rec
    assert (rec["source"], rec["status"], rec["driver"]) == ("nvml", "ok", "550.54.15")
    assert nv.calls == ["init", "free", "shutdown"]
    h100, l4 = rec["gpus"]
    assert h100["pci_bus_id"] == "00000000:1B:00.0"  # bytes from ctypes decoded
    assert h100["power_w"] == pytest.approx(612.37)
    assert h100["throttle"] == ["hw_slowdown"]
    assert h100["unsupported"] == ["retired_pages"]
    assert [link["link"] for link in h100["nvlink"]] == [0, 1, 2, 3]
    assert h100["nvlink"][2]["crc"] == {"total": 20, "delta": 5}
    assert h100["pcie_replay"] == {"total": 5, "delta": 0}
    assert [x["code"] for x in h100["xid"]] == [74]
    # GPU 1: old driver falls back to the throttle-reasons spelling; the rest unsupported
    assert l4["throttle"] == ["gpu_idle"]
    assert l4["unsupported"] == ["ecc", "nvlink", "remapped_rows", "retired_pages", "xid"]
    assert l4["errors"] == {"power_w": "Insufficient Permissions"}
    assert l4["power_w"] is None and l4["lost"] is False
    health = assess([rec])
    assert health.verdict == "fail"
    assert health.reason == "GPU 0: XID 74: NVLink error"
    assert health.gpus[1]["verdict"] == "ok"


def test_stand_in_xids_of_gpus_without_nvml_events_come_from_the_kernel_log(
    tmp_path: Path,
) -> None:
    nv = StandInNvml()
    kmsg = tmp_path / "kmsg"
    kmsg.write_text("")
    sampler = GpuSampler("gpu-001", pynvml=nv, nvidia_smi=False, kmsg=str(kmsg))
    sampler.start()
    assert nv.xid_delivered.wait(2.0)
    with kmsg.open("a") as f:
        # GPU 0's XID came as an NVML event already: its log line must not count twice
        f.write("4,1,1,-;NVRM: Xid (PCI:0000:1b:00): 74, pid=1, NVLink: fatal error\n")
        f.write("4,2,2,-;NVRM: Xid (PCI:0000:3b:00): 31, pid=77, name=python3, MMU Fault\n")
    (rec,) = sampler.stop()
    h100, l4 = rec["gpus"]
    assert [x["code"] for x in h100["xid"]] == [74]
    assert [x["code"] for x in l4["xid"]] == [31]
    assert "xid" not in l4["unsupported"]


def test_stand_in_lost_gpu_fails_its_host(tmp_path: Path) -> None:
    nv = StandInNvml(xid=13)
    sampler = GpuSampler("gpu-001", pynvml=nv, nvidia_smi=False, kmsg=str(tmp_path / "none"))
    sampler.start()
    nv.lose = True
    (rec,) = sampler.stop()
    l4 = rec["gpus"][1]
    assert l4["lost"] is True and l4["name"] == "NVIDIA L4"  # identity kept from the baseline
    health = assess([rec])
    assert health.verdict == "fail"
    assert health.reason == "GPU 1: GPU lost: it no longer answers (fallen off the bus?)"


def test_stand_in_init_failure_other_than_no_gpu_is_an_error() -> None:
    nv = StandInNvml()

    def broken_init() -> None:
        raise _StandInError(18)  # e.g. driver/library version mismatch

    nv.nvmlInit = broken_init  # type: ignore[method-assign]
    (rec,) = GpuSampler("gpu-001", pynvml=nv, nvidia_smi=False).stop()
    assert (rec["status"], rec["source"]) == ("error", "nvml")
    assert rec["error"].startswith("nvmlInit: ")
    health = assess([rec])
    assert health.verdict == "warn" and health.reason.startswith("GPU sampling failed")
