"""A simulated job set for ``--sim --jobs N``: seeded, so every run shows the same jobs.

Jobs are placed as a scheduler packs them: whole hosts, in runs of neighbours (a job's
hosts share leaves where it fits), some single-leaf, some spanning leaves, the rest of
the fabric idle. Users, names and QoS come from small fixed lists; every third job is
marked ``comment = protected`` so the demo can show a policy refusing to touch it.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from cwctl.jobs.model import Job, JobRead

USERS = ("alice", "bob", "chen", "dana", "eli")
NAMES = ("llama-pretrain", "moe-sft", "vit-ablation", "rlhf-rollout", "bert-eval", "diffusion")
FIRST_ID = 4100
PROTECTED_COMMENT = "protected"


def sim_jobs(hosts: Sequence[str], n_jobs: int, seed: int) -> JobRead:
    """``n_jobs`` jobs over ``hosts`` (in fabric order), from ``seed``; each job 1 to a
    quarter of the fabric's hosts, placed on free neighbours; fewer when hosts run out."""
    rng = random.Random(f"cwctl-jobs-{seed}")
    free = list(hosts)
    jobs = []
    for i in range(n_jobs):
        if not free:
            break
        size = min(len(free), rng.choice((1, 2, 2, 4, 4, 8, 8, 16)), max(1, len(hosts) // 4))
        start = rng.randrange(0, len(free) - size + 1)
        taken = tuple(free[start : start + size])
        del free[start : start + size]
        marks = {"qos": rng.choice(("normal", "normal", "high"))}
        if i % 3 == 0:
            marks["comment"] = PROTECTED_COMMENT
        jobs.append(
            Job(
                id=str(FIRST_ID + i),
                user=rng.choice(USERS),
                name=rng.choice(NAMES),
                nodes=taken,
                hosts=taken,
                marks=marks,
            )
        )
    return JobRead("sim", tuple(jobs))
