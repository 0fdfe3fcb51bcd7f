"""Facts about the host the agent runs on: files it reads, is it a VM.

It runs on the far host under any Python 3.8+: standard library only, no ``match``, no
annotations evaluated at run time. Shipped in the agent bundle (``bootstrap.py``).
"""


def read_text(path):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def guess_vm():
    """True when this looks like a virtual machine (hypervisor CPU flag or DMI vendor)."""
    cpuinfo = read_text("/proc/cpuinfo") or ""
    for line in cpuinfo.splitlines():
        if line.startswith("flags") and " hypervisor" in line:
            return True
    vendor = " ".join(
        v
        for v in (
            read_text("/sys/class/dmi/id/sys_vendor"),
            read_text("/sys/class/dmi/id/product_name"),
        )
        if v
    ).lower()
    for word in ("kvm", "qemu", "vmware", "virtualbox", "xen", "amazon ec2", "google", "microsoft"):
        if word in vendor:
            return True
    return False
