"""GPU sampling for the probe agent: what the host's GPUs say during the probing window.

Stdlib only, Python 3.8+: these modules go to remote hosts in the agent bundle. They
are ``readings`` (one GPU's raw reading and the ``gpu`` record built from two of them:
what ``cwctl.gpu.verdict`` reads), ``smi`` (nvidia-smi output parsers), ``xid`` (XID
events from the kernel log), ``nvml`` (readings and XID events through pynvml) and
``sampler`` (the window: baseline, watch, final reading).

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
