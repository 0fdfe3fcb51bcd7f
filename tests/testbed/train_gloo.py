"""A small data-parallel training job: PyTorch, Gloo over TCP on CPU, one rank per host.

Run by ``srun`` (one task per node): the rank and the world size come from Slurm
(``SLURM_PROCID``, ``SLURM_NTASKS``), rank 0's fabric address from ``--master``, the
interface Gloo binds from ``--ifname`` (``GLOO_SOCKET_IFNAME``). Gloo opens its
connections once, at ``init_process_group``, on ephemeral ports, and keeps them: the
workload cwctl must move without any configuration.

Each step is one DistributedDataParallel step of a small MLP (its gradients all-reduced
in buckets) and an all-reduce of ``--floats`` floats, so the network, not the model,
sets the step time (``--compute-s`` adds an idle "compute" phase). Every step, each
rank logs one JSON line to ``LOG/rank-N.jsonl`` through cwctl's step hook
(``cwctl.jobs.stephook``, as a user's script would): ``{"step", "t" (wall clock, s),
"dt" (s since the last step), "pid", "rank", "host"}``; the step index is continuous and
the pid is the rank's own, so a restart would show. The job stops when ``LOG/stop``
exists or after ``--seconds``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import socket
import sys
import time
from pathlib import Path

from cwctl.jobs.stephook import StepLog


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--master", required=True)
    parser.add_argument("--port", type=int, default=29500)
    parser.add_argument("--ifname", default="eth1")
    parser.add_argument("--log", type=Path, required=True)
    parser.add_argument("--seconds", type=float, default=600.0)
    parser.add_argument("--floats", type=int, default=1 << 20)
    parser.add_argument("--timeout", type=float, default=600.0)
    # seconds of "compute" a step, the CPU idle (as while a GPU computes): the test's job
    # sleeps, so that 4 ranks leave a 2-core CI machine's cores to the rest of the suite
    parser.add_argument("--compute-s", type=float, default=0.0)
    args = parser.parse_args()
    os.environ.update(
        MASTER_ADDR=args.master, MASTER_PORT=str(args.port), GLOO_SOCKET_IFNAME=args.ifname
    )
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    torch.set_num_threads(1)
    rank, world = int(os.environ["SLURM_PROCID"]), int(os.environ["SLURM_NTASKS"])
    dist.init_process_group(
        "gloo", rank=rank, world_size=world, timeout=dt.timedelta(seconds=args.timeout)
    )
    torch.manual_seed(rank)
    model = DistributedDataParallel(
        torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.ReLU(), torch.nn.Linear(256, 16))
    )
    optimiser = torch.optim.SGD(model.parameters(), lr=0.01)
    extra = torch.ones(args.floats)
    steps = StepLog(str(args.log / "rank-{rank}.jsonl"))  # cwctl's hook: one line a step
    host, start = socket.gethostname(), time.time()
    stop = torch.zeros(1)
    while True:
        # stopping is decided together: a rank alone leaving would hang the others
        stop.fill_(float((args.log / "stop").exists() or time.time() - start > args.seconds))
        dist.all_reduce(stop, op=dist.ReduceOp.MAX)
        if stop.item():
            break
        loss = model(torch.randn(32, 256)).square().mean()
        loss.backward()
        optimiser.step()
        optimiser.zero_grad()
        if args.compute_s > 0:
            time.sleep(args.compute_s)
        dist.all_reduce(extra)
        extra.div_(world)
        steps.step(rank=rank, host=host)
    # every rank past the last collective before any tears down (a rank that closed its
    # connections while a peer still read the last all-reduce aborted it once), then out
    # without the interpreter's teardown, whose C++ threads Gloo's may outlive
    dist.barrier()
    dist.destroy_process_group()
    steps.close()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    raise SystemExit(main())
