"""Real chronyd daemons for the sync tests, one per cwctl host, none touching the clock.

Each runs ``chronyd -x -d -u root -f CONF``: ``-x`` never adjusts the one shared kernel
clock (chronyd still tracks the offset it *would* correct, which ``tracking`` shows),
``-d`` stays in the foreground (the test owns the process), ``-u root`` keeps the
private 0700 command-socket directory usable (chronyd refuses one owned by another
user). Its own config, pid file, drift file, command socket (``chronyc -h``) and, for a
host that takes cwctl's samples, ``refclock SOCK <dir>/<host>.sock refid CWC``.

The refclock options are the fast ones the test needs: ``poll 1`` (a filtered sample
every 2 s) with ``filter 4`` (at least 4 samples between polls, which a feeder sending
every 0.2 s gives with room to spare on a loaded machine); chronyd selects the source
after 3 polls. Paths stay short (a Unix socket path holds at most 107 bytes).

The parsing here is the test's own, from chronyc's documented CSV columns, not cwctl's.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REFCLOCK_OPTIONS = "refid CWC poll 1 filter 4"


@dataclass
class Chronyd:
    host: str
    dir: Path
    proc: subprocess.Popen[bytes]
    refclock: bool

    @property
    def sock(self) -> str:
        return str(self.dir / f"{self.host}.sock")

    @property
    def cmd_sock(self) -> str:
        return str(self.dir / f"{self.host}-cmd" / "chronyd.sock")

    def chronyc(self, command: str) -> list[list[str]]:
        out = subprocess.run(
            ["chronyc", "-h", self.cmd_sock, "-c", "-n", command],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout
        return [line.split(",") for line in out.splitlines() if line.strip()]

    def cwc_source(self) -> dict[str, object] | None:
        """The CWC line of ``sources``: state, reach (octal), offsets in seconds."""
        for f in self.chronyc("sources"):
            if f[2] == "CWC":
                return {
                    "state": f[1],
                    "reach": int(f[5], 8),
                    "offset_s": float(f[7]),
                    "measured_offset_s": float(f[8]),
                }
        return None

    def cwc_samples(self) -> int:
        for f in self.chronyc("sourcestats"):
            if f[0] == "CWC":
                return int(f[1])
        return 0

    def received(self) -> list[float]:
        """The raw offset (true - host, s) of every sample chronyd took from the socket,
        from its ``refclocks.log`` (``log refclocks``): date, time, refid, DP, L, P, raw
        offset, cooked offset, dispersion."""
        try:
            text = (self.dir / f"{self.host}-log" / "refclocks.log").read_text()
        except FileNotFoundError:
            return []
        rows = [line.split() for line in text.splitlines()]
        # a poll's filtered result is logged too, with "-" for DP and the raw offset
        return [float(r[6]) for r in rows if len(r) >= 9 and r[2] == "CWC" and r[6] != "-"]

    def system_time_s(self) -> float:
        """``tracking``'s System time: positive when the clock is slow of the source."""
        return float(self.chronyc("tracking")[0][4])

    def tracking_ref(self) -> str:
        return self.chronyc("tracking")[0][1]


class ChronydSet:
    """Start chronyds for hosts; ``stop()`` ends every one and removes the directory."""

    def __init__(self) -> None:
        if shutil.which("chronyd") is None or shutil.which("chronyc") is None:
            raise RuntimeError("chronyd/chronyc not installed (apt-get install chrony)")
        self.dir = Path(tempfile.mkdtemp(prefix="cwc-chrony-", dir="/tmp"))
        self.daemons: dict[str, Chronyd] = {}

    def start(
        self, host: str, *, refclock: bool = True, local_stratum: int | None = None
    ) -> Chronyd:
        cmd_dir = self.dir / f"{host}-cmd"
        cmd_dir.mkdir(mode=0o700)
        (self.dir / f"{host}-log").mkdir()
        lines = [
            f"driftfile {self.dir / host}.drift",
            f"pidfile {self.dir / host}.pid",
            f"bindcmdaddress {cmd_dir / 'chronyd.sock'}",
            "cmdport 0",
            "port 0",
            f"logdir {self.dir / host}-log",
            "log refclocks",  # every sample chronyd takes, with its raw offset
        ]
        if refclock:
            lines.append(f"refclock SOCK {self.dir / host}.sock {REFCLOCK_OPTIONS}")
        if local_stratum is not None:
            lines.append(f"local stratum {local_stratum}")
        conf = self.dir / f"{host}.conf"
        conf.write_text("\n".join(lines) + "\n")
        log = open(self.dir / f"{host}.log", "wb")  # noqa: SIM115 (closed with the process)
        proc = subprocess.Popen(
            ["chronyd", "-x", "-d", "-u", "root", "-f", str(conf)],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
        log.close()
        d = Chronyd(host, self.dir, proc, refclock)
        self.daemons[host] = d
        deadline = time.monotonic() + 30
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"chronyd for {host} exited: {self.log(host)}")
            ready = os.path.exists(d.cmd_sock) and (not refclock or os.path.exists(d.sock))
            if ready:
                try:
                    d.chronyc("tracking")
                    return d
                except subprocess.CalledProcessError:
                    pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"chronyd for {host} never answered: {self.log(host)}")
            time.sleep(0.1)

    def log(self, host: str) -> str:
        try:
            return (self.dir / f"{host}.log").read_text()[-2000:]
        except OSError:
            return "?"

    def stop(self) -> None:
        for d in self.daemons.values():
            if d.proc.poll() is None:
                d.proc.terminate()
                try:
                    d.proc.wait(5)
                except subprocess.TimeoutExpired:
                    d.proc.kill()
                    d.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)
