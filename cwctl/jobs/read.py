"""Reading the jobs where the inventory's ``[scheduler]`` says, through a runner.

The runner is whatever carries out an action's commands (``cwctl.actions.runners``:
this machine, or the scheduler's host over SSH): the same one ``scontrol update`` goes
through. No scheduler (``kind = "none"``) is no read, not an error; a scheduler that
does not answer is a ``JobRead`` with its ``error``, never a failed scan.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from cwctl.errors import CwctlError
from cwctl.jobs import k8s, slurm
from cwctl.jobs.model import Job, JobRead

LOCAL = "local"  # a runner's name for this machine (cwctl.actions.plan.LOCAL)
READ_TIMEOUT_S = 20.0  # a scheduler slower than this is reported "not known", not waited on


class Result(Protocol):
    """What a runner's command gives back (``cwctl.actions.runners.CommandResult``)."""

    @property
    def rc(self) -> int: ...

    @property
    def stdout(self) -> str: ...

    def detail(self) -> str: ...


class CommandRunner(Protocol):
    async def run(self, host: str, argv: Sequence[str]) -> Result: ...


def known_names(inventory: Any) -> dict[str, str]:
    """Every name a scheduler may give an inventory host: its name, its short name, its
    address."""
    known: dict[str, str] = {}
    for h in inventory.hosts:
        for alias in (h.address, h.name.split(".", 1)[0], h.name):
            known[alias] = h.name
    return known


def scheduler_of(inventory: Any) -> tuple[str, str] | None:
    """(kind, where its CLI runs) from ``[scheduler]``; None without one."""
    sched = inventory.scheduler
    if sched.kind not in ("slurm", "k8s"):
        return None
    return sched.kind, sched.host or LOCAL


async def read_jobs(inventory: Any, runner: CommandRunner) -> JobRead | None:
    """The running jobs of the inventory's scheduler (None: it names none)."""
    found = scheduler_of(inventory)
    if found is None:
        return None
    kind, where = found
    known = known_names(inventory)
    if kind == "slurm":  # --json where Slurm's openapi plugin answers, else the -o rows
        argv = slurm.SQUEUE_JSON_ARGV
        read = await _ask(runner, where, kind, argv, slurm.parse_squeue_json, known)
        if read.error is None:
            return read
        return await _ask(runner, where, kind, slurm.SQUEUE_ARGV, slurm.parse_squeue, known)
    return await _ask(runner, where, kind, k8s.KUBECTL_ARGV, _no_warnings(k8s.parse_pods), known)


Parse = Callable[[str, Mapping[str, str]], tuple[list[Job], list[str]]]


def _no_warnings(parse: Callable[[str, Mapping[str, str]], list[Job]]) -> Parse:
    return lambda text, known: (parse(text, known), [])


async def _ask(
    runner: CommandRunner, where: str, kind: str, argv: Sequence[str], parse: Parse, known: Any
) -> JobRead:
    try:
        result = await asyncio.wait_for(runner.run(where, argv), READ_TIMEOUT_S)
    except TimeoutError:
        return JobRead(kind, error=f"{argv[0]} on {where}: no answer in {READ_TIMEOUT_S:g} s")
    except CwctlError as exc:  # the runner could not be set up (an SSH identity, ...)
        return JobRead(kind, error=f"{argv[0]} on {where}: {str(exc).splitlines()[0]}")
    if result.rc != 0:
        why = result.detail() or f"exit {result.rc}"
        return JobRead(kind, error=f"{argv[0]} on {where}: {why}")
    try:
        jobs, warnings = parse(result.stdout, known)
    except CwctlError as exc:
        return JobRead(kind, error=str(exc))
    return JobRead(kind, tuple(jobs), warnings=tuple(warnings))
