"""Control: plan a change around a suspect, apply it when asked, journal it, undo it.

``plan.py`` holds the data (``ActionPlan`` of ``Step``s, JSON-serialisable); the
mechanisms build steps (``nccl.py`` NCCL HCA/interface exclusion, ``route.py`` TCP ECMP
next-hop weights, ``slurm.py`` / ``k8s.py`` scheduler drain, ``simulated.py`` changes of
the simulator's model); ``planner.py`` picks the mechanism for a suspect element;
``runners.py`` runs argv lists (locally, over SSH) or model changes; ``executor.py``
applies a plan in order, writing ahead to the journal (``journal.py`` the file and the
lock, ``history.py`` what its lines say: applied, failed, interrupted), and rolls back
what ran when a step fails. ``session.py`` is the one front door for every shell
(``ActionSession``: plan and apply under the action lock, a plan refused when the state
it read has changed, ``prior.py``); ``shell.py`` is the CLI's confirm-and-report flow
on top of it. docs/actions.md describes all of it.
"""
