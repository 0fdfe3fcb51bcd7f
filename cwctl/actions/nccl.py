"""NCCL: take a NIC out of NCCL's use through an ``/etc/nccl.conf``-style file.

An RDMA device (``mlx5_1``, ``bnxt_re0``, ...) is excluded with ``NCCL_IB_HCA``, any
other interface (``eth1``) with ``NCCL_SOCKET_IFNAME``, in NCCL's list grammar: ``^``
excludes, ``=`` matches names exactly (``^=mlx5_1`` excludes exactly ``mlx5_1``, not
``mlx5_10``). The new value is computed here, from the value read on the host first
(``read_argv``), so the plan shows exactly what will be written.

The host runs two small fixed Python programs (``python3 -c PROGRAM ARGS...``; every
value is its own argv element, nothing is pasted into code or a shell):

``SET_PROGRAM PATH KEY VALUE EXPECTED BACKUP`` copies PATH to BACKUP (or, when PATH does
not exist, creates the marker ``BACKUP.none``), then replaces the ``KEY=`` line (or
appends one) and renames a temporary file over PATH. ``EXPECTED`` is ``unset`` or
``=OLD``: if the file's current value differs from what the plan read, it changes
nothing and fails (exit 3), so a plan never overwrites a change made since.

``RESTORE_PROGRAM PATH BACKUP KEY VALUE`` renames BACKUP over PATH (or removes PATH when
the marker says there was none): the undo. With neither there, the change never ran (an
apply killed before the step) when KEY is not VALUE: nothing to restore, exit 0; when KEY
is VALUE it fails (the backup is gone). So the undo of a step that may or may not have
run restores the prior state either way.

Jobs that set ``NCCL_IB_HCA`` in their environment override the file (NCCL reads the
environment first); docs/actions.md says so.
"""

from __future__ import annotations

import json

from cwctl.actions.plan import Step
from cwctl.errors import InputError

DEFAULT_CONF = "/etc/nccl.conf"
RDMA_PREFIXES = ("mlx", "bnxt_re", "irdma", "qedr", "hfi1", "efa", "rxe", "siw", "erdma")

# How every program below reads KEY from the file's lines: the last ``KEY=`` line wins,
# as NCCL reads the file top to bottom. Written once so reading and checking never differ.
_VALUE_OF = """\
def value_of(lines, key):
    value = None
    for line in lines:
        k, eq, v = line.partition("=")
        if eq and k.strip() == key:
            value = v.strip()
    return value
"""

READ_PROGRAM = _VALUE_OF + (
    """\
import json, os, sys
path, key = sys.argv[1:3]
path = os.path.expanduser(path)
try:
    lines = open(path).read().splitlines()
except FileNotFoundError:
    lines = None
value = value_of(lines or (), key)
devices = []
for where in ("/sys/class/net", "/sys/class/infiniband"):
    try:
        devices += os.listdir(where)
    except OSError:
        pass
print(json.dumps({"exists": lines is not None, "value": value, "devices": sorted(devices)}))
"""
)

SET_PROGRAM = _VALUE_OF + (
    """\
import os, shutil, sys, tempfile
path, key, value, expected, backup = sys.argv[1:6]
path, backup = os.path.expanduser(path), os.path.expanduser(backup)
try:
    old = open(path).read()
except FileNotFoundError:
    old = None
lines = (old or "").splitlines()
current = value_of(lines, key)
if expected != ("unset" if current is None else "=" + current):
    sys.exit(f"{path}: {key} is {current!r} now, not what the plan read; changed nothing")
if os.path.lexists(backup) or os.path.lexists(backup + ".none"):
    sys.exit(f"{backup}: a backup is already there; changed nothing")
if old is None:
    open(backup + ".none", "x").close()
else:
    shutil.copy2(path, backup)
out, done = [], False
for line in lines:
    k, eq, v = line.partition("=")
    if eq and k.strip() == key:
        if not done:
            out.append(key + "=" + value)
        done = True
    else:
        out.append(line)
if not done:
    out.append(key + "=" + value)
fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", dir=os.path.dirname(path))
try:
    with os.fdopen(fd, "w") as f:
        f.write("\\n".join(out) + "\\n")
        f.flush()
        os.fsync(f.fileno())
    if old is not None:
        shutil.copymode(backup, tmp)
    else:
        os.chmod(tmp, 0o644)  # every job's user reads it
    os.replace(tmp, path)
except BaseException:
    os.unlink(tmp)
    raise
"""
)

RESTORE_PROGRAM = _VALUE_OF + (
    """\
import os, sys
path, backup = map(os.path.expanduser, sys.argv[1:3])
if os.path.lexists(backup):
    os.replace(backup, path)
elif os.path.lexists(backup + ".none"):
    if os.path.lexists(path):
        os.remove(path)
    os.remove(backup + ".none")
elif len(sys.argv) == 5:
    key, value = sys.argv[3:5]
    try:
        lines = open(path).read().splitlines()
    except FileNotFoundError:
        lines = []
    if value_of(lines, key) == value:
        sys.exit(f"{backup}: no backup to restore {path} from, and {key} is set")
    print(f"{path}: not changed ({key} is not {value}; no backup): nothing to restore")
else:
    sys.exit(f"{backup}: no backup to restore {path} from")
"""
)


def check_conf_path(path: str) -> str:
    """``--nccl-conf``: an absolute path or one under ``~`` (expanded on the host, to the
    SSH user's home, by the programs above); anything else is refused."""
    if not path.strip():
        raise InputError("--nccl-conf: empty path")
    if not (path.startswith("/") or path == "~" or path.startswith("~/")):
        raise InputError(
            f"--nccl-conf {path!r}: give an absolute path or one under ~ (the host's home)"
        )
    return path


def setting_for(nic: str) -> str:
    """``NCCL_IB_HCA`` for an RDMA device, ``NCCL_SOCKET_IFNAME`` for a network interface."""
    return "NCCL_IB_HCA" if nic.startswith(RDMA_PREFIXES) else "NCCL_SOCKET_IFNAME"


def read_argv(python: str, path: str, key: str) -> list[str]:
    return [python, "-c", READ_PROGRAM, path, key]


def devices_read(stdout: str) -> list[str] | None:
    """The network and RDMA devices the host listed while ``READ_PROGRAM`` ran (None:
    it did not say)."""
    try:
        devices = json.loads(stdout.strip().splitlines()[-1]).get("devices")
    except (ValueError, IndexError, AttributeError):
        return None
    return [str(d) for d in devices] if isinstance(devices, list) else None


def file_state(stdout: str) -> str:
    """What a plan's prior read says of the file alone (whether it exists, the key's
    value), for comparing before applying: the device list beside it names every
    interface of the host, which containers and namespaces add and remove all the time,
    and is no part of what the step changes. Unparsed output is compared whole."""
    try:
        data = json.loads(stdout.strip().splitlines()[-1])
        return json.dumps({"exists": data["exists"], "value": data["value"]})
    except (ValueError, IndexError, KeyError, TypeError):
        return stdout


def parse_read(stdout: str, host: str) -> tuple[bool, str | None]:
    """(file exists, current value or None) from ``READ_PROGRAM``'s output."""
    try:
        data = json.loads(stdout.strip().splitlines()[-1])
        return bool(data["exists"]), data["value"]
    except (ValueError, IndexError, KeyError, TypeError):
        raise InputError(f"{host}: could not read the NCCL settings: {stdout[-200:]!r}") from None


def _items(body: str) -> list[str]:
    return [i for i in body.split(",") if i]


def _name(item: str) -> str:
    return item.split(":", 1)[0]  # "mlx5_1:1" is port 1 of mlx5_1


def excluded_value(
    current: str | None, nic: str, *, key: str, host: str, others: tuple[str, ...] = ()
) -> str | None:
    """The value of ``key`` that keeps NCCL off ``nic``, given the ``current`` one;
    None when nothing needs to change. ``others`` are the host's other NICs (from the
    inventory), used to tell whether a prefix would catch more than ``nic``.
    Raises ``InputError`` where no value would be right."""
    where = f"{host}: {key}={current!r}"
    value = (current or "").strip()
    if not value:
        return f"^={nic}"
    if value.startswith("^="):
        items = _items(value[2:])
        if nic in {_name(i) for i in items}:
            return None
        return "^=" + ",".join([*items, nic])
    if value.startswith("^"):
        items = _items(value[1:])
        if any(nic.startswith(_name(i)) for i in items):
            return None
        caught = [o for o in others if o != nic and o.startswith(nic)]
        if caught:
            raise InputError(
                f"{where} excludes by prefix; adding {nic} would also exclude "
                f"{', '.join(caught)}: edit it by hand"
            )
        return "^" + ",".join([*items, nic])
    if value.startswith("="):
        items = _items(value[1:])
        kept = [i for i in items if _name(i) != nic]
        if len(kept) == len(items):
            return None  # NCCL does not use it anyway
        if not kept:
            raise InputError(f"{where} lists only {nic}: excluding it leaves NCCL no device")
        return "=" + ",".join(kept)
    items = _items(value)
    if not any(nic.startswith(_name(i)) for i in items):
        return None
    raise InputError(
        f"{where} selects devices by prefix, {nic} among them; cwctl will not rewrite a "
        "prefix list: edit it by hand"
    )


def exclude_step(
    host: str, *, python: str, path: str, key: str, current: str | None, new: str, backup: str
) -> Step:
    expected = "unset" if current is None else f"={current}"
    return Step(
        host=host,
        description=f"set {key}={new} in {path} (was {current or 'unset'}; backup {backup})",
        argv=(python, "-c", SET_PROGRAM, path, key, new, expected, backup),
        undo_argv=(python, "-c", RESTORE_PROGRAM, path, backup, key, new),
        undo_description=f"restore {path} from {backup}",
    )
