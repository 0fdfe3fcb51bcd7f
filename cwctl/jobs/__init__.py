"""Which jobs run where: the scheduler's running jobs mapped to inventory hosts, and which
of them a suspect or an action touches.

``model.py`` holds ``Job`` and ``JobMap``; ``slurm.py`` and ``k8s.py`` read the
schedulers' own output (``squeue``'s stable ``-o`` format, ``kubectl get pods -o json``);
``read.py`` runs them where the inventory's ``[scheduler]`` says, through any runner
(``cwctl.actions.runners``); ``simjobs.py`` makes a seeded job set for ``--sim``;
``affected.py`` says which jobs each suspect hurts (from the snapshot's crossings) and
which jobs a plan touches. Nothing here runs a command itself.
"""

from __future__ import annotations

from cwctl.jobs.model import Job, JobMap, JobRead

__all__ = ["Job", "JobMap", "JobRead"]
