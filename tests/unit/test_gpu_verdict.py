"""GPU verdicts: per GPU and per host, from gpu records (recorded readings and hand-made)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from cwctl.gpu import XID_CATALOGUE, GpuHealth, assess, describe
from cwctl.gpu.verdict import worst
from cwctl.probe.gpu.readings import gpu_build, gpu_record
from cwctl.probe.gpu.smi import SMI_QUERY_FIELDS, smi_parse_query_csv, smi_readings
from cwctl.probe.gpu.xid import smi_parse_xid_lines

DATA = Path(__file__).resolve().parents[1] / "data" / "gpu"


def _read(name: str) -> str:
    return (DATA / name).read_text()


def _record(gpus: list[dict[str, Any]], status: str = "ok", **extra: Any) -> dict[str, Any]:
    rec = gpu_record("gpu-001", "nvidia-smi", status, gpus, 2_000_000_000, 1_000_000_000)
    rec.update(extra)
    return rec


def _healthy(index: int = 0) -> dict[str, Any]:
    """One healthy GPU entry as the sampler writes it (an H100 reading, no deltas)."""
    reading = smi_parse_query_csv(_read("h100x8_query_after.csv"))[index]
    return gpu_build([reading], [reading])[0]


def test_no_records_or_no_gpu_is_none() -> None:
    assert assess([]).verdict == "none"
    no_gpu = gpu_record("h", "none", "no-gpu", [], 1)
    health = assess([no_gpu])
    assert (health.verdict, health.reason, health.gpus) == ("none", None, [])


def test_a_healthy_box_is_ok_and_keeps_stable_keys() -> None:
    health = assess([_record([_healthy(i) for i in range(8)])])
    assert isinstance(health, GpuHealth)
    assert (health.verdict, health.reason) == ("ok", None)
    assert len(health.gpus) == 8
    keys = {
        "index",
        "name",
        "uuid",
        "pci_bus_id",
        "util_pct",
        "mem_used_bytes",
        "mem_total_bytes",
        "temp_c",
        "power_w",
        "sm_clock_mhz",
        "throttle",
        "throttle_mask",
        "ecc",
        "retired_pages",
        "remapped_rows",
        "pcie_replay",
        "nvlink",
        "xid",
        "unsupported",
        "errors",
        "lost",
        "verdict",
        "reason",
        "reasons",
    }
    for gpu in health.gpus:
        assert set(gpu) == keys
        assert (gpu["verdict"], gpu["reason"], gpu["reasons"]) == ("ok", None, [])
    assert health.to_json()["verdict"] == "ok"


def test_sw_power_cap_and_idle_are_not_problems() -> None:
    gpu = _healthy()
    gpu["throttle"] = ["gpu_idle", "sw_power_cap", "sync_boost"]
    assert assess([_record([gpu])]).verdict == "ok"


def test_hw_slowdown_and_thermal_throttling_warn() -> None:
    readings = smi_parse_query_csv(_read("a100x4_query.csv"))
    health = assess([_record(gpu_build([], readings))])
    by_index = {gpu["index"]: gpu for gpu in health.gpus}
    assert by_index[0]["verdict"] == "ok"
    assert by_index[1]["verdict"] == "warn"
    assert by_index[1]["reasons"] == ["HW slowdown throttling", "thermal throttling"]
    assert by_index[2]["reasons"] == [
        "uncorrectable ECC errors since the driver loaded (2)",
        "row remapping pending (reset the GPU)",
    ]
    assert (by_index[3]["verdict"], by_index[3]["reason"]) == ("fail", "row remapping failure")
    assert (health.verdict, health.reason) == ("fail", "GPU 3: row remapping failure")


def test_uncorrectable_ecc_during_the_window_fails() -> None:
    gpu = _healthy()
    gpu["ecc"]["uncorrected_volatile"] = {"total": 3, "delta": 1}
    health = assess([_record([gpu])])
    assert health.verdict == "fail"
    assert health.reason == "GPU 0: uncorrectable ECC errors (+1 during the window)"


def test_nvlink_crc_rising_warns_and_recovery_rising_fails() -> None:
    before = smi_readings(
        _read("h100x8_query_before.csv"),
        SMI_QUERY_FIELDS,
        _read("h100x8_nvlink_e_before.txt"),
        _read("h100x8_nvlink_s.txt"),
        _read("h100x8_q_before.txt"),
    )
    after = smi_readings(
        _read("h100x8_query_after.csv"),
        SMI_QUERY_FIELDS,
        _read("h100x8_nvlink_e_after.txt"),
        _read("h100x8_nvlink_s.txt"),
        _read("h100x8_q_after.txt"),
    )
    gpus = gpu_build(before, after)
    health = assess([_record(gpus)])
    assert health.verdict == "warn"
    assert health.reason == "GPU 3: NVLink CRC errors rising on link 7 (+45)"
    assert health.gpus[6]["reason"] == "PCIe replays rising (+38)"
    assert [gpu["verdict"] for gpu in health.gpus].count("ok") == 6
    # the same totals without a rise in the window are history, not news
    steady = gpu_build(after, after)
    assert assess([_record(steady)]).verdict == "ok"
    # a link that needs retraining during the window is a failure
    bad = copy.deepcopy(gpus)
    bad[3]["nvlink"][7]["recovery"] = {"total": 2, "delta": 2}
    assert (
        assess([_record(bad)]).gpus[3]["reason"] == "NVLink recovery errors rising on link 7 (+2)"
    )


def test_a_link_down_among_active_links_warns() -> None:
    gpu = _healthy()
    gpu["nvlink"] = [
        {"link": 0, "active": True, "replay": None, "recovery": None, "crc": None},
        {"link": 1, "active": False, "replay": None, "recovery": None, "crc": None},
    ]
    assert assess([_record([gpu])]).gpus[0]["reason"] == "NVLink link 1 down"


def test_xid_79_from_recorded_readings_fails_the_host() -> None:
    before = smi_parse_query_csv(_read("h100x8_query_before.csv"))
    after = smi_parse_query_csv(_read("xid79_query.csv"))
    xids = smi_parse_xid_lines(_read("xid79_dmesg.txt"))
    health = assess([_record(gpu_build(before, after, xids))])
    assert health.verdict == "fail"
    assert health.reason == "GPU 2: XID 79: GPU has fallen off the bus"
    by_index = {gpu["index"]: gpu for gpu in health.gpus}
    assert by_index[2]["reasons"] == [
        "XID 79: GPU has fallen off the bus",
        "GPU lost: it no longer answers (fallen off the bus?)",
    ]
    # XID 13 is an application fault: a warning on GPU 3, once however often it repeats
    assert by_index[3]["reasons"] == ["XID 13: graphics engine exception (application fault)"]


def test_xid_catalogue_severities() -> None:
    for code in (48, 64, 74, 79, 95, 119, 120):
        assert describe(code).severity == "fail", code
    for code in (13, 31, 43, 45, 63, 92, 94):
        assert describe(code).severity == "warn", code
    unknown = describe(4242)
    assert (unknown.severity, unknown.description) == ("warn", "not in cwctl's XID catalogue")
    assert all(info.code == code for code, info in XID_CATALOGUE.items())


def test_records_merge_deltas_add_up_and_xids_accumulate() -> None:
    first, second = _healthy(), _healthy()
    first["pcie_replay"] = {"total": 10, "delta": 4}
    second["pcie_replay"] = {"total": 13, "delta": 3}
    first["xid"] = [{"code": 63, "t": 1, "text": None}]
    health = assess([_record([first]), _record([second])])
    (gpu,) = health.gpus
    assert gpu["pcie_replay"] == {"total": 13, "delta": 7}
    assert [x["code"] for x in gpu["xid"]] == [63]
    assert gpu["reasons"] == [
        "XID 63: ECC page retirement or row remapping recorded (reset the GPU)",
        "PCIe replays rising (+7)",
    ]


def test_a_failed_sampler_warns() -> None:
    rec = gpu_record("h", "nvml", "error", [], 1, error="nvmlInit: Unknown Error")
    health = assess([rec])
    assert (health.verdict, health.reason) == (
        "warn",
        "GPU sampling failed: nvmlInit: Unknown Error",
    )


def test_non_gpu_records_and_garbage_are_ignored() -> None:
    health = assess([{"type": "summary"}, _record([_healthy(), "junk"])])  # type: ignore[list-item]
    assert health.verdict == "ok" and len(health.gpus) == 1


_FINDINGS = {
    "ok": lambda gpu: None,
    "warn": lambda gpu: gpu.update(throttle=["hw_slowdown"]),
    "fail": lambda gpu: gpu.update(lost=True),
}


@settings(max_examples=40, deadline=None)
@given(st.lists(st.sampled_from(["ok", "warn", "fail"]), min_size=1, max_size=8))
def test_host_verdict_is_the_worst_gpus(verdicts: list[str]) -> None:
    gpus = []
    for index, verdict in enumerate(verdicts):
        gpu = _healthy()
        gpu.update(index=index, uuid=f"GPU-{index}", pci_bus_id=f"00000000:{index + 16:02X}:00.0")
        _FINDINGS[verdict](gpu)
        gpus.append(gpu)
    health = assess([_record(gpus)])
    assert [gpu["verdict"] for gpu in health.gpus] == verdicts
    assert health.verdict == worst(verdicts)
    if health.verdict != "ok":
        first_worst = verdicts.index(health.verdict)
        assert health.reason is not None and health.reason.startswith(f"GPU {first_worst}: ")
