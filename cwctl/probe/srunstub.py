"""The srun step's stub: one per node, between srun's shared pipes and the agent.

``cwctl scan --via slurm`` starts ONE ``srun`` step, one task per node, every task
``python3 -c BOOTSTRAP_CODE`` (``bootstrap.py``), and writes this file first on srun's
stdin, which srun copies to every task. So every node runs this stub, which then:

* says who it is on stdout (``@NAME.``, NAME from ``SLURMD_NODENAME``);
* reads frames from the shared stdin, ``<target> <size>\\n<size bytes>``, and passes
  the bytes of those for ``*`` (everybody: the agent bundle, sent once) or for NAME
  (its params and control lines) to the agent's own stdin, a pipe; a frame of size 0
  for NAME, or the end of srun's stdin, closes the agent's stdin (the agent exits);
* runs the ordinary agent bootstrap on that pipe, in this process;
* re-frames the agent's stdout as short lines, ``=<base64 of up to 540 bytes>.``,
  because srun cuts lines longer than about 1 KB into labelled pieces (measured with
  Debian's 22.05): the operator's side joins pieces until the closing ``.``;
* at the end, ``!<exit status>.``.

Python 3.8+, standard library only: it runs on every node.
"""

import base64
import os
import sys
import threading

CHUNK = 540  # bytes of agent output per line: 720 base64 characters, well under 1 KB
BOOTSTRAP_NAME = "__cwctl_assembler__"


def write_all(fd, data):
    while data:
        data = data[os.write(fd, data) :]


def read_exactly(stream, size):
    data = bytearray()
    while len(data) < size:
        chunk = stream.read(size - len(data))
        if not chunk:
            return None
        data.extend(chunk)
    return bytes(data)


class Stub:
    def __init__(self, name):
        self.name = name.encode()
        self.lock = threading.Lock()
        self.real_in = os.dup(0)
        self.real_out = os.dup(1)
        in_r, self.in_w = os.pipe()
        self.out_r, out_w = os.pipe()
        os.dup2(in_r, 0)
        os.dup2(out_w, 1)
        os.close(in_r)
        os.close(out_w)

    def emit(self, line):
        with self.lock:
            write_all(self.real_out, line + b"\n")

    def pump_in(self):
        stream = os.fdopen(self.real_in, "rb", 0)
        try:
            while self.in_w is not None:
                words = stream.readline().split()
                if len(words) != 2:
                    break  # srun's stdin ended (or garbage): the agent's ends too
                data = read_exactly(stream, int(words[1]))
                if data is None:
                    break
                if words[0] == self.name and not data:
                    break
                if words[0] in (b"*", self.name):
                    write_all(self.in_w, data)
        except OSError:
            pass  # the agent is gone; nothing left to feed
        finally:
            in_w, self.in_w = self.in_w, None
            if in_w is not None:
                os.close(in_w)

    def pump_out(self):
        while True:
            chunk = os.read(self.out_r, 1 << 16)
            if not chunk:
                return
            for i in range(0, len(chunk), CHUNK):
                self.emit(b"=" + base64.b64encode(chunk[i : i + CHUNK]) + b".")

    def run_agent(self):
        """The ordinary bootstrap, on the agent's pipe: length line, assembler, exec."""
        stream = os.fdopen(0, "rb", 0, closefd=False)
        size = int(stream.readline() or b"0")
        code = read_exactly(stream, size) if size else None
        if code is None:
            return 3
        try:
            exec(compile(code, "cwctl-agent", "exec"), {"__name__": BOOTSTRAP_NAME})
        except SystemExit as exc:
            return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except BaseException as exc:
            sys.stderr.write(f"cwctl-srun-stub: agent failed: {exc!r}\n")
            return 1
        return 0


def main():
    stub = Stub(os.environ.get("SLURMD_NODENAME") or os.uname().nodename)
    stub.emit(b"@" + stub.name + b".")
    feeder = threading.Thread(target=stub.pump_in, daemon=True)
    reader = threading.Thread(target=stub.pump_out, daemon=True)
    feeder.start()
    reader.start()
    code = stub.run_agent()
    sys.stdout.flush()
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)  # the agent's stdout closed: reader ends
    reader.join(30)
    stub.emit(b"!" + str(code).encode() + b".")
    sys.stderr.flush()
    os._exit(code)


if __name__ == BOOTSTRAP_NAME:
    main()
