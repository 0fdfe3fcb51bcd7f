"""Control: plan a change around a suspect, apply it when asked, journal it, undo it.

``plan.py`` holds the data (``ActionPlan`` of ``Step``s, JSON-serialisable); the
mechanisms build steps (``nccl.py`` NCCL HCA/interface exclusion, ``route.py`` TCP ECMP
next-hop weights, ``slurm.py`` / ``k8s.py`` scheduler drain, ``simulated.py`` changes of
the simulator's model); ``planner.py`` picks the mechanism for a suspect element;
``runners.py`` runs argv lists (locally, over SSH) or model changes; ``executor.py``
applies a plan in order, rolls back what ran when a step fails, and appends to the
journal (``journal.py``). ``session.py`` is the CLI's flow, ``api.py`` the one for other
shells (the TUI: ``prepare`` a plan, show ``.text``, ``.apply()`` on yes).
docs/actions.md describes all of it.
"""
