"""The ``slurm`` launcher: every agent of a scan in ONE ``srun`` step, one task per node.

``cwctl scan --via slurm -i INVENTORY`` runs the same scan as over SSH (``run_scan``:
hello, two-phase start, records), but the operator's machine holds one ``srun`` process
instead of one SSH session per host, and Slurm's own fan-out (slurmctld, slurmstepd on
each node) starts the agents. Inventory host names are the Slurm node names.

The pipes (``cwctl/probe/srunstub.py`` is the far side):

* stdin: srun copies it to every task. First the bootstrap's length line and the stub,
  then frames ``<target> <size>\\n<bytes>``: the agent bundle once for ``*``, each
  host's params and control lines for that host only; ``<host> 0`` closes that agent's
  stdin. Closing srun's stdin ends every agent.
* stdout: ``srun --label`` prefixes each task's lines with its task number; the stub
  names its node first (``@NAME.``), then sends the agent's output base64-framed in
  lines short enough that srun never cuts them (``=...``), then ``!<status>.``. Pieces
  are joined per task until the closing ``.``, so a cut line would still join.

What one srun step costs: the stdin frames reach every node, so per-host messages
(params, the start line with its peer list) cost O(hosts) bytes per node, O(hosts²) in
all: about 1 KB per host per node (10 MB per node at 10 000 hosts).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import signal
from collections.abc import Sequence
from pathlib import Path

from cwctl.inventory import load_inventory
from cwctl.probe.bootstrap import bootstrap_argv
from cwctl.scan.collection import Collection, HostInfo
from cwctl.scan.pathcache import PathCache
from cwctl.scan.request import Progress, ScanRequest
from cwctl.transport.base import hard_lifetime_s, run_scan
from cwctl.transport.hostrun import STDERR_KEEP, HostFailure, end_process
from cwctl.transport.plan import inventory_plan

STUB = Path(__file__).resolve().parents[1] / "probe" / "srunstub.py"


def srun_argv(
    nodes: Sequence[str],
    python: str = "python3",
    srun: str = "srun",
    lifetime_s: float | None = None,
) -> list[str]:
    """The one srun command of a scan: one task per node, labelled output, no buffering;
    every task the bootstrap with the scan's hard lifetime (``bootstrap_argv``)."""
    return [
        srun,
        f"--nodes={len(nodes)}",
        f"--ntasks={len(nodes)}",
        "--ntasks-per-node=1",
        f"--nodelist={','.join(nodes)}",
        "--job-name=cwctl-scan",
        "--label",
        "--unbuffered",
        "--kill-on-bad-exit=0",  # one agent's failure never ends the others
        "--immediate=30",  # a node drained or down: fail, do not queue forever
        *bootstrap_argv(python, lifetime_s=lifetime_s),
    ]


USABLE_STATES = frozenset({"idle", "mixed", "allocated", "completing"})


async def unusable_nodes(hosts: Sequence[HostInfo], sinfo: str = "sinfo") -> dict[str, str]:
    """Nodes the step must leave out (one of them would fail the whole allocation), and why:
    unknown to Slurm, or drained, down, failed... (``sinfo -N``, one call for all)."""
    names = [h.name for h in hosts]
    try:
        proc = await asyncio.create_subprocess_exec(
            sinfo, "-h", "-N", "-o", "%N|%T", f"--nodes={','.join(names)}",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, err = await asyncio.wait_for(proc.communicate(), 30.0)
    except (OSError, TimeoutError) as exc:
        return dict.fromkeys(names, f"cannot ask Slurm about its nodes: {sinfo}: {exc}")
    if proc.returncode:
        why = err.decode(errors="replace").strip().splitlines()
        return dict.fromkeys(names, f"sinfo failed: {why[-1] if why else proc.returncode}")
    state: dict[str, str] = {}
    for line in out.decode(errors="replace").splitlines():
        node, _, value = line.partition("|")
        state[node.strip()] = value.strip()
    out_of_service = {}
    for name in names:
        now = state.get(name)
        if now is None:
            out_of_service[name] = "not a node of this Slurm cluster (sinfo does not list it)"
        elif now.rstrip("*~#!%$@^-") not in USABLE_STATES:
            out_of_service[name] = f"Slurm node state is {now}: left out of the srun step"
    return out_of_service


class SrunHostSession:
    """One node's agent inside the step: an ``AgentSession`` for ``run_scan``."""

    def __init__(self, step: SrunStep, name: str) -> None:
        self.step = step
        self.name = name
        self.queue: asyncio.Queue[bytes] = asyncio.Queue()
        self.exit_code: int | None = None
        self.ended = asyncio.Event()
        self.bind_address: str | None = None
        self._payload_sent = False

    async def send(self, data: bytes) -> None:
        if not self._payload_sent:  # length line + assembler + bundle, then the params line
            self._payload_sent = True
            head, params = _split_payload(data)
            await self.step.broadcast_once(head)
            data = params
        await self.step.send_frame(self.name, data)

    async def read(self) -> bytes:
        if self.ended.is_set() and self.queue.empty():
            return b""
        return await self.queue.get()

    async def finish(self) -> tuple[int | None, str | None, str]:
        await self.ended.wait()
        return self.exit_code, None, self.step.stderr_tail(self.name)

    async def close(self) -> None:
        if not self.ended.is_set():
            with contextlib.suppress(Exception):
                await self.step.send_frame(self.name, b"")

    def end(self, code: int | None) -> None:
        if not self.ended.is_set():
            self.exit_code = code
            self.ended.set()
            self.queue.put_nowait(b"")


def _split_payload(data: bytes) -> tuple[bytes, bytes]:
    """``agent_payload``'s bytes as (what every host gets alike, the params line)."""
    cut = data.rstrip(b"\n").rfind(b"\n") + 1
    if not data[cut:].startswith(b'{"type":"params"'):
        raise ValueError("agent payload without a params line at its end")
    return data[:cut], data[cut:]


class SrunStep:
    """The srun process of one scan, and the host sessions inside it."""

    def __init__(
        self,
        hosts: Sequence[HostInfo],
        python: str = "python3",
        srun: str = "srun",
        unusable: dict[str, str] | None = None,
        lifetime_s: float | None = None,
    ):
        self.unusable = dict(unusable or {})  # node -> why Slurm cannot run on it now
        usable = [h.name for h in hosts if h.name not in self.unusable]
        self.argv = srun_argv(usable, python, srun, lifetime_s)
        self.sessions = {name: SrunHostSession(self, name) for name in usable}
        self.proc: asyncio.subprocess.Process | None = None
        self._lock = asyncio.Lock()
        self._broadcast: bytes | None = None
        self._label: dict[str, str] = {}  # srun task number -> node name
        self._pieces: dict[str, bytes] = {}
        self._stderr: dict[str, bytes] = {}
        self._tasks: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        async with self._lock:
            if self.proc is not None:
                return
            try:
                self.proc = await asyncio.create_subprocess_exec(
                    *self.argv,
                    stdin=asyncio.subprocess.PIPE,
                    stdout=asyncio.subprocess.PIPE,
                    stderr=asyncio.subprocess.PIPE,
                    start_new_session=True,
                )
            except OSError as exc:
                for session in self.sessions.values():
                    session.end(127)
                raise HostFailure("error", f"cannot run {self.argv[0]}: {exc.strerror}") from None
            stub = STUB.read_bytes()
            await self._write(f"{len(stub)}\n".encode() + stub)
            self._tasks = [
                asyncio.create_task(self._read_stdout()),
                asyncio.create_task(self._read_stderr()),
            ]

    async def launch(self, info: HostInfo) -> SrunHostSession:
        if info.name in self.unusable:
            raise HostFailure("unreachable", f"{info.name}: {self.unusable[info.name]}")
        await self.start()
        session = self.sessions[info.name]
        if session.ended.is_set():
            raise HostFailure("unreachable", f"{info.name}: srun: {self.stderr_tail(info.name)}")
        return session

    async def _write(self, data: bytes) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write(data)
        await self.proc.stdin.drain()

    async def broadcast_once(self, head: bytes) -> None:
        if self._broadcast is None:
            self._broadcast = head
            await self.send_frame("*", head)
        elif head != self._broadcast:
            raise ValueError("hosts of one srun step must share one agent bundle")

    async def send_frame(self, target: str, data: bytes) -> None:
        await self._write(f"{target} {len(data)}\n".encode() + data)

    async def _read_stdout(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        try:
            while line := await self.proc.stdout.readline():
                label, sep, text = line.rstrip(b"\n").partition(b": ")
                if sep:
                    self._piece(label.strip().decode(), text)
        except (ValueError, asyncio.LimitOverrunError):
            pass  # not srun's labelled output: what came so far stands
        finally:
            code = await self.proc.wait()
            for session in self.sessions.values():  # no "!" from its stub: srun's status
                session.end(code or None)

    def _piece(self, label: str, text: bytes) -> None:
        whole = self._pieces.pop(label, b"") + text
        if not whole.endswith(b"."):
            self._pieces[label] = whole
            return
        kind, body = whole[:1], whole[1:-1]
        if kind == b"@":
            self._label[label] = body.decode()
            return
        session = self.sessions.get(self._label.get(label, ""))
        if session is None:
            return
        if kind == b"=":
            session.queue.put_nowait(base64.b64decode(body))
        elif kind == b"!":
            session.end(int(body) if body.lstrip(b"-").isdigit() else None)

    async def _read_stderr(self) -> None:
        assert self.proc is not None and self.proc.stderr is not None
        while line := await self.proc.stderr.readline():
            label, sep, text = line.partition(b": ")
            key = self._label.get(label.strip().decode(errors="replace"), "") if sep else ""
            kept = self._stderr.get(key, b"") + (text if key else line)
            self._stderr[key] = kept[-STDERR_KEEP:]

    def stderr_tail(self, name: str) -> str:
        """The node's own stderr, else srun's (an allocation that failed names no node)."""
        text = self._stderr.get(name) or self._stderr.get("", b"")
        return text.decode("utf-8", "replace")

    async def close(self) -> None:
        if self.proc is None:
            return
        await end_process(self.proc, ((None, 5.0), (signal.SIGINT, 3.0), (signal.SIGKILL, 5.0)))
        with contextlib.suppress(Exception):
            await asyncio.wait_for(asyncio.gather(*self._tasks), 5.0)


async def collect_slurm(
    request: ScanRequest, progress: Progress | None = None, *, paths: PathCache | None = None
) -> Collection:
    """Load ``request.inventory`` and probe its hosts through one srun step (``paths``:
    what earlier scans discovered, the source's own)."""
    assert request.inventory is not None
    inventory = load_inventory(request.inventory)
    plan = inventory_plan(inventory, request, source="slurm", hello_margin_s=30.0, cache=paths)
    step = SrunStep(
        plan.hosts,
        python=inventory.ssh.python,
        unusable=await unusable_nodes(plan.hosts),
        lifetime_s=hard_lifetime_s(plan),  # nothing outlives the scan on a node
    )
    try:
        return await run_scan(plan, step.launch, progress)
    finally:
        await asyncio.shield(step.close())


class SlurmSource:
    """The inventory's hosts started through one srun step per scan (``--via slurm``)."""

    name = "slurm"

    def __init__(self, request: ScanRequest) -> None:
        self.request = request
        self.paths = PathCache()  # what one scan discovered, the next need not trace again

    async def scan(self, request: ScanRequest, progress: Progress | None = None) -> Collection:
        return await collect_slurm(request, progress, paths=self.paths)

    async def aclose(self) -> None:
        """Each scan's srun step ends with it."""
