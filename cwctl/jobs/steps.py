"""A job's own pace, read from the step logs its hook writes (``stephook.py``): whether an
action gave it back its healthy step time, and when.

``read_argv(python, pattern, lines)`` is what runs on a host: ``python3 -c`` with a short
reader (stdlib) that prints, as one JSON object, the last ``lines`` lines of every file
matching the glob ``pattern`` there. ``pace(files, since)`` judges one file's steps:
the healthy step time is the median of the last steps before ``since``; the job is back
at the first of ``BACK_RUN`` steps in a row within ``BACK_WITHIN`` of it after ``since``.
``JobCheck`` sums the files up (the slowest rank decides) and says it in one line.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

BACK_WITHIN = 1.10  # a step within 10 % of the healthy step time
BACK_RUN = 5  # steps in a row
HEALTHY_STEPS = 50  # the last steps before the action that set the healthy pace
READ_LINES = 2000

_READER = """
import glob, json, sys
out = {}
for path in sorted(glob.glob(sys.argv[1]))[:64]:
    try:
        with open(path, "rb") as f:
            f.seek(0, 2); size = f.tell(); f.seek(max(0, size - 200 * int(sys.argv[2])))
            out[path] = f.read().decode("utf-8", "replace").splitlines()[-int(sys.argv[2]):]
    except OSError as e:
        out[path] = ["error: " + str(e)]
print(json.dumps(out))
"""


def read_argv(python: str, pattern: str, lines: int = READ_LINES) -> tuple[str, ...]:
    return (python, "-c", _READER, pattern, str(lines))


def parse(text: str) -> dict[str, list[tuple[float, float]]]:
    """The reader's output: per file, its steps as (t, dt); lines that are not steps are
    skipped (a line being written, a log of something else)."""
    try:
        files = json.loads(text)
    except ValueError:
        return {}
    out: dict[str, list[tuple[float, float]]] = {}
    for path, lines in files.items() if isinstance(files, dict) else ():
        steps = []
        for line in lines if isinstance(lines, list) else ():
            try:
                entry = json.loads(line)
                steps.append((float(entry["t"]), float(entry["dt"])))
            except (ValueError, KeyError, TypeError):
                continue
        out[str(path)] = steps
    return out


@dataclass(frozen=True)
class Pace:
    healthy_s: float | None  # None: no step before the action
    back_s: float | None  # since the action; None: not back (yet)
    steps_after: int
    recent_s: float | None  # the median of the last steps after the action


def pace(steps: Sequence[tuple[float, float]], since: float) -> Pace:
    before = [dt for t, dt in steps if t < since][-HEALTHY_STEPS:]
    after = [(t, dt) for t, dt in steps if t >= since]
    healthy = statistics.median(before) if before else None
    recent = statistics.median(dt for _, dt in after[-BACK_RUN:]) if after else None
    back = None
    if healthy is not None:
        for i in range(len(after) - BACK_RUN + 1):
            if all(dt <= BACK_WITHIN * healthy for _, dt in after[i : i + BACK_RUN]):
                back = after[i][0] - since
                break
    return Pace(healthy, back, len(after), recent)


@dataclass(frozen=True)
class JobCheck:
    """The job's pace after an action, over every step log read (the slowest decides)."""

    pattern: str
    files: int
    back: bool
    back_s: float | None
    healthy_s: float | None
    recent_s: float | None
    waited_s: float

    @classmethod
    def of(cls, pattern: str, paces: Mapping[str, Pace], waited_s: float) -> JobCheck:
        known = [p for p in paces.values() if p.healthy_s is not None]
        back = bool(known) and all(p.back_s is not None for p in known)
        return cls(
            pattern=pattern,
            files=len(paces),
            back=back,
            back_s=max(p.back_s for p in known if p.back_s is not None) if back else None,
            healthy_s=max((p.healthy_s for p in known if p.healthy_s), default=None),
            recent_s=max((p.recent_s for p in known if p.recent_s), default=None),
            waited_s=waited_s,
        )

    def message(self) -> str:
        if not self.files:
            return f"job: no step log matches {self.pattern} on the hosts acted on"
        if self.healthy_s is None:
            return f"job: {self.files} step log(s), none with a step before the action"
        ms = f"healthy {self.healthy_s * 1000:.0f} ms"
        if self.back and self.back_s is not None:
            return (
                f"job: steps back within {BACK_WITHIN - 1:.0%} of its pace ({ms}) "
                f"{self.back_s:.1f} s after the action, in all {self.files} step log(s)"
            )
        now = f"{self.recent_s * 1000:.0f} ms" if self.recent_s is not None else "no step"
        return f"job: not back after {self.waited_s:.0f} s ({ms}, now {now})"

    def to_json(self) -> dict[str, object]:
        return {"pattern": self.pattern, "files": self.files, "back": self.back,
                "back_s": self.back_s, "healthy_s": self.healthy_s,
                "recent_s": self.recent_s, "waited_s": self.waited_s}  # fmt: skip
