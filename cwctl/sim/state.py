"""What the operator changed in a simulated fabric, kept between runs of cwctl.

After every change applied to a model (``cwctl reroute spine2 --sim --apply``), its
``ModelState`` is written to ``$CWCTL_STATE_DIR/sim/<key>.json``, the key being the
fabric's shape (hosts, hosts per leaf, spines, or the inventory file). The sim source
restores it into each model it builds, so a later ``cwctl scan --sim`` sees the change.
The seed, faults, load and timestamps are not in the key: they describe the fabric's
conditions, not what the operator changed.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
from pathlib import Path
from typing import Any

from cwctl import settings
from cwctl.runtime.atomic import PRIVATE_MODE, private_dir, remove_stale_temporaries, write_text
from cwctl.sim.model import FabricModel
from cwctl.sim.world import ModelState


def sim_key(shape: dict[str, Any]) -> str:
    text = json.dumps(shape, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def shape_of(request: Any) -> dict[str, Any]:
    """What identifies a simulated fabric across runs (see the module docstring)."""
    if request.inventory is not None:
        return {"inventory": str(Path(request.inventory).absolute())}
    sim = request.sim
    return {"hosts": sim.hosts, "hosts_per_leaf": sim.hosts_per_leaf, "spines": sim.spines}


def sim_dir(*, create: bool = False) -> Path:
    """``$CWCTL_STATE_DIR/sim``, checked (``atomic.private_dir``): a state directory that
    is a symlink the user owns is followed; a ``sim`` that is a symlink, another user's,
    or writable by group or others is refused. Missing and not ``create``: its path."""
    state = private_dir(settings.state_dir(), "state directory", owned_link=True, create=create)
    return private_dir(state / "sim", "simulator state directory", create=create)


def state_path(request: Any, *, create: bool = False) -> Path:
    return sim_dir(create=create) / f"{sim_key(shape_of(request))}.json"


def state_to_json(state: ModelState) -> dict[str, Any]:
    return {
        "ecmp_weight": [[leaf, spine, w] for (leaf, spine), w in sorted(state.ecmp_weight.items())],
        "excluded_nics": sorted(state.excluded_nics),
        "drained_hosts": sorted(state.drained_hosts),
        "steered": [[a, b, spine] for (a, b), spine in sorted(state.steered.items())],
    }


def state_from_json(data: dict[str, Any]) -> ModelState:
    return ModelState(
        ecmp_weight={(str(a), str(b)): int(w) for a, b, w in data.get("ecmp_weight", [])},
        excluded_nics={str(n) for n in data.get("excluded_nics", [])},
        drained_hosts={str(h) for h in data.get("drained_hosts", [])},
        steered={(str(a), str(b)): str(s) for a, b, s in data.get("steered", [])},
    )


def saved_state_json(request: Any) -> dict[str, Any]:
    """The state saved for ``request``'s fabric, as ``state_to_json`` writes it (the
    default state when none was saved or it cannot be read)."""
    try:
        data = json.loads(state_path(request).read_text())
        return state_to_json(state_from_json(data["state"]))
    except (OSError, ValueError, KeyError, TypeError):
        return state_to_json(ModelState())


def save_state(model: FabricModel, request: Any) -> Path:
    path = state_path(request, create=True)
    remove_stale_temporaries(path)  # a writer killed mid-write left its copy
    data = {"shape": shape_of(request), "state": state_to_json(model.state)}
    text = json.dumps(data, indent=1, sort_keys=True) + "\n"
    try:
        write_text(path, text, mode=PRIVATE_MODE, option="simulator state")
    except OSError as exc:
        if exc.errno != errno.ENOSPC or not path.is_file() or path.is_symlink():
            raise
        _rewrite_in_place(path, text.encode())  # a full disk: no room for a second copy
    return path


def _rewrite_in_place(path: Path, data: bytes) -> None:
    """Overwrite the state file in its own blocks (a full disk has no room for the
    temporary copy an atomic write needs; the file is the simulator's, a torn write of
    it reads as the default state). OSError if even that fails."""
    fd = os.open(path, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        view = memoryview(data)
        offset = 0
        while offset < len(data):
            offset += os.pwrite(fd, view[offset:], offset)
        os.ftruncate(fd, len(data))
        os.fsync(fd)
    finally:
        os.close(fd)


def restore_saved_state(model: FabricModel, request: Any) -> bool:
    """Load the state saved for ``request``'s fabric into ``model``; False when none.
    A state file that no longer fits the model (names it lacks) is ignored."""
    if request.sim is None:
        return False
    path = state_path(request)
    try:
        data = json.loads(path.read_text())
        state = state_from_json(data["state"])
    except FileNotFoundError:
        return False
    except (OSError, ValueError, KeyError, TypeError):
        return False
    fabric = model.fabric
    fits = (
        all(leaf in fabric.leaves and spine in fabric.spines for leaf, spine in state.ecmp_weight)
        and all(fabric.has("nic", n) for n in state.excluded_nics)
        and all(h in fabric.hosts for h in state.drained_hosts)
        and all(
            a in fabric.hosts and b in fabric.hosts and s in fabric.spines
            for (a, b), s in state.steered.items()
        )
    )
    if not fits:
        return False
    model.restore_state(state)
    return True
