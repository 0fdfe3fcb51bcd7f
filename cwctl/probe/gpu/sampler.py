"""The GPU sampler: a baseline at the start of the window, the final reading at its end.

Part of the agent bundle: standard library only, Python 3.8+ syntax, no annotations.
"""

import contextlib
import shutil
import subprocess
import time

from cwctl.probe.gpu.nvml import NVML_NO_GPU_ERRORS, NvmlXidWatch, gpu_nvml_reading, nvml_text
from cwctl.probe.gpu.readings import gpu_build, gpu_new_reading, gpu_pci_key, gpu_record
from cwctl.probe.gpu.smi import (
    SMI_LOST,
    SMI_NO_GPU,
    SMI_QUERY_FIELD_SETS,
    SMI_TIMEOUT_S,
    NoGpu,
    smi_readings,
)
from cwctl.probe.gpu.xid import GpuKmsgXidWatch


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
            if getattr(exc, "value", None) in NVML_NO_GPU_ERRORS:
                self.error = f"nvmlInit: {exc}"  # kept as the record's "warning"
                return  # no driver here: nvidia-smi would fail alike, but let it say so
            self.source, self.status, self.error = "nvml", "error", f"nvmlInit: {exc}"
            return
        self.pynvml = nv
        self.source = "nvml"
        try:
            self.driver = nvml_text(nv.nvmlSystemGetDriverVersion())
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
            out, err = proc.communicate(timeout=SMI_TIMEOUT_S)
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
            lost = [ln for ln in (err or "").splitlines() if SMI_LOST.search(ln)]
            if out is not None and (lost or SMI_LOST.search(out)):
                query_out, self.fields = "\n".join([out, *lost]), fields
                break
            last_err = (err or out or "").strip().splitlines()[-1:] or [f"exit {proc.returncode}"]
            last_err = last_err[0]
        texts = {}
        for key, proc in procs.items():
            out, _ = self._collect(proc)
            texts[key] = out if out is not None and proc.returncode == 0 else ""
        if query_out is None:
            if any(s in last_err for s in SMI_NO_GPU):
                raise NoGpu(last_err)
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
                self.xid_watch = NvmlXidWatch(self.pynvml, live)
                self.xid_watch.start()
                if self.xid_watch.unsupported or self.xid_watch.thread is None:
                    # GPUs NVML cannot deliver events for: read their XIDs from the log
                    self.kmsg_watch = GpuKmsgXidWatch(self.kmsg)
                    self.kmsg_watch.start()
            else:
                self.xid_watch = GpuKmsgXidWatch(self.kmsg)
                self.xid_watch.start()
        except NoGpu as exc:
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
        except NoGpu as exc:
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
