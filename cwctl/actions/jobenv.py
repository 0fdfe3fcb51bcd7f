"""``cwctl job-env``: the NCCL/Gloo environment a job's hosts need after cwctl's actions.

Read from the journal (the actions applied and not rolled back, on the same fabric):

- a NIC taken out of NCCL's use (``reroute HOST/NIC``): ``NCCL_IB_HCA=^=NIC,...`` for an
  RDMA device; for a network interface, the interfaces left, as NCCL and Gloo name them
  (``NCCL_SOCKET_IFNAME==eth0``, ``GLOO_SOCKET_IFNAME=eth0``: Gloo has no exclusion
  syntax, so the list is positive; from the inventory's ``nics``);
- a spine or link steered around, or hosts steered at: a note (the fabric or the hosts'
  own rules carry it, the job sets nothing);
- a drained host among the job's: a note.

For a job on several hosts the exclusions of all of them are merged (NCCL pairs NICs by
rail: a NIC left out on one host is best left out on all). NCCL reads its environment
before ``/etc/nccl.conf``: a job that sets ``NCCL_IB_HCA`` itself hides the file's
exclusion, which is what this output is for (``eval "$(cwctl job-env 4242)"`` before
``torchrun``, or a Slurm ``TaskProlog``, whose ``export`` lines Slurm adds to the task's
environment).
"""

from __future__ import annotations

import re
import shlex
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from cwctl.actions.history import APPLIED, INTERRUPTED, History, history
from cwctl.actions.nccl import RDMA_PREFIXES, setting_for
from cwctl.actions.runners import Runner
from cwctl.actions.session import build_target
from cwctl.actions.target import ActionTarget, same_fabric
from cwctl.errors import InputError
from cwctl.inventory import load_inventory

if TYPE_CHECKING:
    from cwctl.actions.journal import Journal
    from cwctl.scan.request import ScanRequest


@dataclass
class JobEnv:
    hosts: list[str]
    variables: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # rows of the scheduler's skipped

    def shell(self, header: str) -> str:
        """POSIX shell for ``eval``: ``export K='V'`` lines after ``#`` comments that say
        where each came from. A comment holds no line break or other control character
        (journalled names are text from elsewhere: a newline would end the comment and
        run the rest under ``eval``)."""
        lines = [f"# {_printable(header)}", *(f"# {_printable(n)}" for n in self.notes)]
        lines += [f"export {k}={shlex.quote(v)}" for k, v in self.variables.items()]
        if not self.variables:
            lines.append("# nothing to set: no NIC of these hosts is excluded")
        return "\n".join(lines) + "\n"

    def taskprolog(self) -> str:
        """Slurm's TaskProlog protocol: ``export NAME=value`` lines only, the value taken
        literally by slurmstepd (quotes would become part of it), so each must be plain:
        NCCL's grammar and interface names, nothing a line or a shell could split."""
        for k, v in self.variables.items():
            if not _PLAIN.match(v):
                raise InputError(f"{k}={v!r}: not plain enough for a TaskProlog line")
        return "".join(f"export {k}={v}\n" for k, v in self.variables.items())

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": JOB_ENV_SCHEMA,
            "hosts": self.hosts,
            "env": self.variables,
            "notes": self.notes,
        }


JOB_ENV_SCHEMA = "cwctl.job-env/1"
_PLAIN = re.compile(r"^[A-Za-z0-9_.,:=^+/@-]*$")  # NCCL_IB_HCA=^=mlx5_1:1,mlx5_3


def _printable(text: str) -> str:
    """``text`` with every control character and line separator as ``?``."""
    return "".join(
        "?" if unicodedata.category(c) in ("Cc", "Zl", "Zp") or c == "\x85" else c for c in text
    )


def in_effect(hist: History, fabric: Mapping[str, Any]) -> list[Any]:
    """The applies on ``fabric`` whose changes may stand: applied (or interrupted after
    a step may have changed something), not rolled back since."""
    out = []
    for action in hist.actions:
        if action.event != "apply" or hist.undone_by(action.id) is not None:
            continue
        stands = action.status == APPLIED or (
            action.status == INTERRUPTED and bool(action.may_have_changed())
        )
        if stands and same_fabric(action.plan.context) == same_fabric(fabric):
            out.append(action)
    return out


def job_env(
    hosts: Sequence[str],
    actions: Iterable[Any],
    nics: Mapping[str, Sequence[str]],
) -> JobEnv:
    """The environment for a job on ``hosts``, from the ``actions`` in effect
    (``in_effect``); ``nics`` each host's NICs (the inventory's) for positive lists."""
    wanted = set(hosts)
    env = JobEnv(list(hosts))
    excluded: dict[str, list[str]] = {}  # nic -> the hosts it is excluded on
    for action in actions:
        plan = action.plan
        element = plan.element
        host, slash, nic = element.partition("/")
        if plan.kind == "reroute" and slash:
            if host in wanted and plan.steps:
                excluded.setdefault(nic, []).append(host)
                env.notes.append(f"{host}: {nic} excluded by {action.id}")
        elif plan.kind == "drain" and element in wanted:
            env.notes.append(f"{element} is drained ({action.id}): the job loses it at its end")
        elif plan.kind != "drain" and plan.steps and element not in wanted:
            env.notes.append(
                f"traffic steered around {element} by {action.id} ({plan.kind}): the fabric "
                "or the hosts' rules carry it, nothing for the job to set"
            )
    rdma = sorted(n for n in excluded if n.startswith(RDMA_PREFIXES))
    sockets = sorted(n for n in excluded if setting_for(n) == "NCCL_SOCKET_IFNAME")
    if rdma:
        env.variables["NCCL_IB_HCA"] = "^=" + ",".join(rdma)
    if sockets:
        left = _common_left(hosts, nics, set(sockets))
        if left:
            env.variables["NCCL_SOCKET_IFNAME"] = "=" + ",".join(left)
            env.variables["GLOO_SOCKET_IFNAME"] = ",".join(left)
        else:
            env.variables["NCCL_SOCKET_IFNAME"] = "^=" + ",".join(sockets)
            env.notes.append(
                "no interface is left on every host by the inventory's nics: Gloo cannot "
                "exclude one (GLOO_SOCKET_IFNAME names interfaces): set it by hand"
            )
    if env.variables:
        env.notes.append(
            "a job's own NCCL_IB_HCA / NCCL_SOCKET_IFNAME hides /etc/nccl.conf: these "
            "lines carry cwctl's exclusions into it"
        )
    return env


def _common_left(
    hosts: Sequence[str], nics: Mapping[str, Sequence[str]], excluded: set[str]
) -> list[str]:
    """The network interfaces (not RDMA devices) every host has, less ``excluded``."""
    common: list[str] | None = None
    for host in hosts:
        mine = [n for n in nics.get(host, ()) if not n.startswith(RDMA_PREFIXES)]
        common = mine if common is None else [n for n in common if n in mine]
    return [n for n in common or [] if n not in excluded]


async def env_for(
    request: ScanRequest,
    *,
    job_id: str | None,
    hosts: Sequence[str],
    journal: Journal,
    **ssh: Any,
) -> tuple[str, JobEnv]:
    """(a header line, the environment) for job ``job_id`` (its hosts read from the
    scheduler, or the simulated job set) or for ``hosts``; every name checked first."""
    target, runner = build_target(request, **ssh)
    # positive NIC lists need the inventory's NICs: the target's own (loaded once), or
    # the one a simulated fabric was given
    inventory = target.inventory
    if inventory is None and request.inventory is not None:
        inventory = load_inventory(request.inventory)
    nics = {h.name: tuple(h.nics) for h in inventory.hosts} if inventory is not None else {}
    try:
        return await _env_for(target, runner, job_id, hosts, journal, nics)
    finally:
        await runner.close()


async def _env_for(
    target: ActionTarget,
    runner: Runner,
    job_id: str | None,
    hosts: Sequence[str],
    journal: Journal,
    nics: dict[str, tuple[str, ...]],
) -> tuple[str, JobEnv]:
    shape = target.shape()
    known, where = shape.hosts, shape.where
    unknown = [h for h in hosts if h not in known]
    if unknown:
        raise InputError(f"--nodes: no host {unknown[0]!r} in {where}")
    header = f"cwctl job-env for {', '.join(hosts)}"
    warnings: list[str] = []
    if job_id is not None:
        read = await target.read_jobs(runner)
        if read is None:
            raise InputError(
                f"{where} names no scheduler to ask for job {job_id} ([scheduler] kind; "
                "--sim --jobs N): give --nodes instead"
            )
        if read.error is not None:
            raise InputError(f"cannot read the running jobs: {read.error}")
        warnings = list(read.warnings)
        found = [j for j in read.jobs if j.id == job_id]  # each row checked, not the first
        if len(found) > 1:
            raise InputError(f"job {job_id!r} is listed {len(found)} times by {read.scheduler}")
        job = found[0] if found else None
        if job is None:
            ids = ", ".join(j.id for j in read.jobs[:8]) or "none"
            raise InputError(f"no running job {job_id!r} ({read.scheduler} lists: {ids})")
        if not job.hosts:
            raise InputError(f"job {job_id} runs on no host of {where} ({', '.join(job.nodes)})")
        hosts = list(job.hosts)
        header = f"cwctl job-env for job {job.label()}: {', '.join(hosts)}"
    env = job_env(hosts, in_effect(history(journal), target.context()), nics)
    env.warnings = warnings
    return header, env
