"""The hook a training script calls once per step, so cwctl can judge an action by the job's
own pace: standard library only, no cwctl import, so it may be copied next to the script.

    from cwctl.jobs.stephook import StepLog      # or this file, copied
    steps = StepLog()                            # $CWCTL_STEP_LOG, else no log at all
    for batch in loader:
        ...
        steps.step()

Each call appends one JSON line, ``{"step": N, "t": wall clock s, "dt": s since the last
step, "pid": P}``, to the file (line buffered, so a reader sees whole lines), made with
its directory if need be. ``CWCTL_STEP_LOG`` may hold ``{rank}``, filled from ``RANK``,
``SLURM_PROCID`` or ``0``: one file per rank. ``cwctl reroute --job-log PATTERN`` (and a
watch policy's ``job_log``) reads the files back on the hosts it acted on
(``cwctl.jobs.steps``).
"""

from __future__ import annotations

import json
import os
import time
from typing import IO

ENV = "CWCTL_STEP_LOG"


def _rank() -> str:
    return os.environ.get("RANK") or os.environ.get("SLURM_PROCID") or "0"


class StepLog:
    def __init__(self, path: str | None = None) -> None:
        template = path if path is not None else os.environ.get(ENV, "")
        self.path = template.replace("{rank}", _rank()) if template else ""
        self._file: IO[str] | None = None
        self._step = 0
        self._last = time.time()
        if self.path:
            os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
            self._file = open(self.path, "a", buffering=1, encoding="utf-8")  # noqa: SIM115

    def step(self, **extra: object) -> None:
        """One step done (``extra``: more keys for the line, e.g. ``loss=0.3``)."""
        now = time.time()
        if self._file is not None:
            line = {"step": self._step, "t": now, "dt": now - self._last, "pid": os.getpid()}
            self._file.write(json.dumps({**extra, **line}) + "\n")
        self._step += 1
        self._last = now

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
