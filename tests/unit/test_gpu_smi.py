"""The nvidia-smi path of the GPU sampler, against recorded readings in tests/data/gpu/.

The readings are nvidia-smi's own formats (``--query-gpu ... --format=csv,noheader,nounits``,
``nvlink -e``, ``nvlink -s``, ``-q``, kernel XID lines). The end-to-end test runs the
real sampler against a stand-in ``nvidia-smi`` script that replays those files, because
this machine has no GPU.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from cwctl.gpu import assess
from cwctl.probe.gpu.readings import gpu_build, gpu_decode_throttle, gpu_pci_key
from cwctl.probe.gpu.sampler import GpuSampler
from cwctl.probe.gpu.smi import (
    SMI_QUERY_FIELD_SETS,
    SMI_QUERY_FIELDS,
    smi_parse_nvlink_errors,
    smi_parse_nvlink_status,
    smi_parse_q_replays,
    smi_parse_query_csv,
    smi_readings,
)
from cwctl.probe.gpu.xid import GpuKmsgXidWatch, smi_parse_xid_lines
from cwctl.records import encode_line, parse_line

DATA = Path(__file__).resolve().parents[1] / "data" / "gpu"


def _read(name: str) -> str:
    return (DATA / name).read_text()


def _h100(when: str) -> list[dict]:
    return smi_readings(
        _read(f"h100x8_query_{when}.csv"),
        SMI_QUERY_FIELDS,
        _read(f"h100x8_nvlink_e_{when}.txt"),
        _read("h100x8_nvlink_s.txt"),
        _read(f"h100x8_q_{when}.txt"),
    )


def test_query_csv_of_an_8x_h100_box() -> None:
    readings = smi_parse_query_csv(_read("h100x8_query_after.csv"))
    assert [r["index"] for r in readings] == list(range(8))
    first = readings[0]
    assert first["name"] == "NVIDIA H100 80GB HBM3"
    assert first["uuid"].startswith("GPU-")
    assert first["pci_bus_id"] == "00000000:1B:00.0"
    assert first["mem_total_bytes"] == 81559 * 1024 * 1024
    assert first["power_w"] == pytest.approx(612.37)
    assert first["sm_clock_mhz"] == 1980
    assert first["throttle_mask"] == 0
    assert first["counters"]["ecc.uncorrected_volatile"] == 0
    assert first["flags"] == {"remapped_rows.pending": False, "remapped_rows.failure": False}
    # H100 retires no pages (it remaps rows): [N/A] is unsupported, not a failure
    assert first["unsupported"] == {"retired_pages"}
    assert gpu_decode_throttle(readings[5]["throttle_mask"]) == ["sw_power_cap"]


def test_nvlink_error_counters_and_status() -> None:
    errors = smi_parse_nvlink_errors(_read("h100x8_nvlink_e_after.txt"))
    assert sorted(errors) == list(range(8))
    assert len(errors[3]) == 18
    assert errors[3][7] == {"replay": 9, "recovery": 0, "crc": 57}
    assert errors[0][7] == {"replay": 0, "recovery": 0, "crc": 0}
    status = smi_parse_nvlink_status(_read("h100x8_nvlink_s.txt"))
    assert all(all(links.values()) and len(links) == 18 for links in status.values())
    down = smi_parse_nvlink_status("GPU 0: NVIDIA H100 (UUID: GPU-x)\n\t Link 3: <inactive>\n")
    assert down == {0: {3: False}}


def test_older_nvlink_format_sums_flit_and_data_crc() -> None:
    text = (
        "GPU 0: Tesla V100-SXM2-32GB (UUID: GPU-1)\n"
        "\t Link 0: Replay Errors: 1\n"
        "\t Link 0: Recovery Errors: 0\n"
        "\t Link 0: CRC FLIT Errors: 4\n"
        "\t Link 0: CRC Data Errors: 3\n"
    )
    assert smi_parse_nvlink_errors(text) == {0: {0: {"replay": 1, "recovery": 0, "crc": 7}}}


def test_pcie_replays_from_q_output() -> None:
    replays = smi_parse_q_replays(_read("h100x8_q_after.txt"))
    assert len(replays) == 8
    assert replays["0000:d1:00"] == 41
    assert replays["0000:1b:00"] == 0


def test_readings_over_a_window_give_totals_and_deltas() -> None:
    gpus = gpu_build(_h100("before"), _h100("after"))
    gpu3 = gpus[3]
    link7 = next(link for link in gpu3["nvlink"] if link["link"] == 7)
    assert link7["crc"] == {"total": 57, "delta": 45}
    assert link7["replay"] == {"total": 9, "delta": 7}
    assert link7["active"] is True
    assert gpus[6]["pcie_replay"] == {"total": 41, "delta": 38}
    assert gpus[0]["ecc"]["uncorrected_volatile"] == {"total": 0, "delta": 0}
    assert gpus[0]["retired_pages"]["sbe"] is None
    assert "xid" in gpus[0] and gpus[0]["xid"] == []


def test_unsupported_cells_of_pcie_cards_on_an_old_driver() -> None:
    fields = SMI_QUERY_FIELD_SETS[1]
    assert "clocks_throttle_reasons.active" in fields
    readings = smi_readings(
        _read("pcie_old_driver_query.csv"), fields, "", _read("pcie_nvlink_s.txt")
    )
    t4, rtx = readings
    assert t4["counters"]["retired_pages.dbe"] == 0
    assert t4["flags"]["retired_pages.pending"] is False
    assert t4["throttle_mask"] == 1
    assert {"nvlink", "pcie_replay"} <= t4["unsupported"]
    assert rtx["power_w"] is None
    assert {"power_w", "ecc", "retired_pages", "nvlink"} <= rtx["unsupported"]
    assert rtx["errors"] == {}


def test_a_gpu_fallen_off_the_bus_and_its_xid() -> None:
    readings = smi_parse_query_csv(_read("xid79_query.csv"))
    lost = [r for r in readings if r["lost"]]
    assert len(lost) == 1 and gpu_pci_key(lost[0]["pci_bus_id"]) == "0000:52:00"
    xids = smi_parse_xid_lines(_read("xid79_dmesg.txt"))
    assert [(x["pci"], x["code"]) for x in xids] == [
        ("0000:61:00", 13),
        ("0000:61:00", 13),
        ("0000:52:00", 79),
    ]
    assert "fallen off the bus" in xids[-1]["text"]
    # the GPU was seen before it fell: it keeps its index, name and UUID
    gpus = gpu_build(_h100("before"), readings, xids)
    fallen = next(gpu for gpu in gpus if gpu["lost"])
    assert fallen["index"] == 2 and fallen["uuid"].startswith("GPU-")
    assert [x["code"] for x in fallen["xid"]] == [79]
    assert [x["code"] for x in gpus[3]["xid"]] == [13, 13]


def test_kmsg_record_format() -> None:
    xids = smi_parse_xid_lines(_read("xid79_kmsg.txt"))
    assert [(x["pci"], x["code"]) for x in xids] == [("0000:52:00", 79)]


def test_kmsg_watch_reads_only_what_was_logged_during_the_window(tmp_path: Path) -> None:
    log = tmp_path / "kmsg"
    log.write_text("4,1,1,-;NVRM: Xid (PCI:0000:52:00): 48, pid=1, DBE (before the window)\n")
    watch = GpuKmsgXidWatch(str(log))
    watch.start()
    assert watch.supported
    with log.open("a") as f:
        f.write(_read("xid79_kmsg.txt"))
    events = watch.stop()
    assert [e["code"] for e in events] == [79]
    assert isinstance(events[0]["t"], int)


def test_kmsg_watch_without_access_is_unsupported(tmp_path: Path) -> None:
    watch = GpuKmsgXidWatch(str(tmp_path / "missing"))
    watch.start()
    assert not watch.supported
    assert watch.stop() == []


def _stand_in_smi(tmp_path: Path, scenario: dict[str, str]) -> Path:
    """A stand-in ``nvidia-smi`` (no GPU here): replays recorded files by argument, the
    ``before`` file on the first call with those arguments, the ``after`` file later."""
    script = tmp_path / "nvidia-smi"
    script.write_text(
        f"#!{sys.executable}\n"
        "import json, os, sys\n"
        f"scenario = json.loads({json.dumps(json.dumps(scenario))})\n"
        "args = sys.argv[1:]\n"
        "key = {'nvlink -e': 'e', 'nvlink -s': 's', '-q': 'q'}.get(' '.join(args), 'query')\n"
        f"seen = os.path.join({str(tmp_path)!r}, 'called-' + key)\n"
        "when = 'after' if os.path.exists(seen) else 'before'\n"
        "open(seen, 'w').close()\n"
        "name = scenario.get(key + '_' + when) or scenario.get(key)\n"
        "if name is None:\n"
        "    sys.stderr.write('No devices were found\\n'); sys.exit(6)\n"
        f"sys.stdout.write(open(os.path.join({str(DATA)!r}, name)).read())\n"
        "err = scenario.get(key + '_' + when + '_stderr')\n"
        "if err:\n"
        f"    sys.stderr.write(open(os.path.join({str(DATA)!r}, err)).read()); sys.exit(15)\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


def test_sampler_through_a_stand_in_nvidia_smi(tmp_path: Path) -> None:
    smi = _stand_in_smi(
        tmp_path,
        {
            "query_before": "h100x8_query_before.csv",
            "query_after": "h100x8_query_after.csv",
            "e_before": "h100x8_nvlink_e_before.txt",
            "e_after": "h100x8_nvlink_e_after.txt",
            "s": "h100x8_nvlink_s.txt",
            "q_before": "h100x8_q_before.txt",
            "q_after": "h100x8_q_after.txt",
        },
    )
    kmsg = tmp_path / "kmsg"
    kmsg.write_text("")
    sampler = GpuSampler("gpu-001", nvidia_smi=str(smi), pynvml=False, kmsg=str(kmsg))
    sampler.start()
    with kmsg.open("a") as f:  # the kernel logs an XID during the window
        f.write("4,7,9,-;NVRM: Xid (PCI:0000:9d:00): 74, pid=1, NVLink: fatal error detected\n")
    (rec,) = sampler.stop()
    assert parse_line(encode_line(rec)) == rec  # one JSON line of cwctl.rec/1
    assert (rec["type"], rec["source"], rec["status"], rec["host"]) == (
        "gpu",
        "nvidia-smi",
        "ok",
        "gpu-001",
    )
    assert rec["t_start"] <= rec["t"]
    assert len(rec["gpus"]) == 8
    assert [x["code"] for x in rec["gpus"][4]["xid"]] == [74]
    health = assess([rec])
    assert health.verdict == "fail"
    assert health.reason == "GPU 4: XID 74: NVLink error"
    assert health.gpus[3]["reason"] == "NVLink CRC errors rising on link 7 (+45)"


def test_sampler_when_nvidia_smi_fails_on_a_lost_gpu(tmp_path: Path) -> None:
    """nvidia-smi exits non-zero and says so on stderr: the other GPUs still count."""
    lines = _read("xid79_query.csv").splitlines(keepends=True)
    (tmp_path / "stdout.csv").write_text("".join(ln for ln in lines if "Unable" not in ln))
    (tmp_path / "stderr.txt").write_text("".join(ln for ln in lines if "Unable" in ln))
    smi = _stand_in_smi(
        tmp_path,
        {
            "query_before": "h100x8_query_before.csv",
            "query_after": str(tmp_path / "stdout.csv"),
            "query_after_stderr": str(tmp_path / "stderr.txt"),
        },
    )
    sampler = GpuSampler("gpu-001", nvidia_smi=str(smi), pynvml=False, kmsg="/nonexistent")
    sampler.start()
    (rec,) = sampler.stop()
    assert rec["status"] == "ok"
    assert len(rec["gpus"]) == 8
    fallen = [gpu for gpu in rec["gpus"] if gpu["lost"]]
    assert [gpu["index"] for gpu in fallen] == [2]
    assert all("xid" in gpu["unsupported"] for gpu in rec["gpus"])  # no kernel log here
    assert assess([rec]).reason == "GPU 2: GPU lost: it no longer answers (fallen off the bus?)"


def test_sampler_with_nvidia_smi_but_no_device_says_no_gpu(tmp_path: Path) -> None:
    smi = _stand_in_smi(tmp_path, {})
    sampler = GpuSampler("gpu-001", nvidia_smi=str(smi), pynvml=False)
    sampler.start()
    (rec,) = sampler.stop()
    assert (rec["source"], rec["status"], rec["gpus"]) == ("nvidia-smi", "no-gpu", [])
    assert "No devices were found" in rec["warning"]
    assert assess([rec]).verdict == "none"


def test_sampler_without_any_source_says_no_gpu() -> None:
    (rec,) = GpuSampler("h", nvidia_smi=False, pynvml=False).stop()
    assert (rec["source"], rec["status"], rec["gpus"]) == ("none", "no-gpu", [])
    assert "error" not in rec


def test_gpu_modules_run_on_their_own(tmp_path: Path) -> None:
    """As the agent runs them: assembled from memory in an isolated interpreter (-I -S,
    no cwctl, no site-packages), with nothing but the GPU modules of the bundle."""
    from cwctl.probe import assembler
    from cwctl.probe.bootstrap import agent_sources

    main = "import json\nfrom cwctl.probe.gpu.sampler import GpuSampler\n"
    main += "def main():\n    print(json.dumps(GpuSampler('h', nvidia_smi=False).stop()))\n"
    sources = {n: s for n, s in agent_sources().items() if n.startswith("cwctl.probe.gpu")}
    sources["gpu_main"] = main.encode()
    frames = b"".join(
        f"{name} {len(data)}\n".encode() + data
        for name, data in ((n, zlib.compress(s)) for n, s in sources.items())
    )
    code = Path(assembler.__file__).read_bytes()
    stdin = f"{len(code)}\n".encode() + code + frames + b"run gpu_main\n"
    from cwctl.probe.bootstrap import BOOTSTRAP_CODE

    out = subprocess.run(
        [sys.executable, "-I", "-S", "-c", BOOTSTRAP_CODE],
        input=stdin,
        capture_output=True,
        env={"PATH": os.environ.get("PATH", "")},
        cwd=tmp_path,
        timeout=30,
        check=True,
    ).stdout
    (rec,) = json.loads(out)
    assert (rec["status"], rec["source"]) == ("no-gpu", "none")
