"""The watch's policy file: which suspects it may act on, how, and its guard rails.

Off unless given (``cwctl watch --policy FILE``): without a policy the watch observes and
exports, and never acts. The file is TOML, validated whole before the first round
(``load_policy``); every problem is one line ``FILE:LINE: key 'K': message``, raised
together in one ``PolicyError`` (the inventory's shape, ``cwctl.config.tomlcheck``).

    dry_run = false          # true: decide and log, never act
    protect = ["comment=protected", "qos=high", "label:cwctl.io/protected=true"]
                             # refuse a plan that touches a running job so marked

    [act]
    rounds = 3               # the same suspect named in this many consecutive rounds
    min_score = 0.5          # each time with at least this score (0..1)
    max_per_hour = 4         # actions in any 3 600 s (restores not counted)
    hold_s = 600             # an acted-on element is restored after this long clean
    restore = true           # false: never roll an action back on its own
    job_log = "/var/tmp/steps-*.jsonl"  # optional: the job's step logs, judged after acting

    [[allow]]
    kind = "link"            # switch | link | nic | host | gpu (a host's GPU verdict: fail)
    action = "reroute"       # reroute | steer | drain
    match = ["leaf*-spine*"] # optional: shell patterns over the element's name

    [rebalance]              # present: colliding elephant flows are spread (rebalance.py)
    target = 1.2             # balanced: each leaf's busiest link within this of the mean
    min_gain = 0.1           # no move unless max/mean falls by at least this
    flow_hold_s = 600        # a flow moved is not moved again for this long
    every_s = 30             # the uplinks measured at most this often
    interval_s = 2           # the socket counters' window

docs/watch.md describes every key; ``docs/watch-policy.example.toml`` shows them all.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from cwctl.actions.rebalance import MIN_GAIN, TARGET
from cwctl.actions.uplinkload import INTERVAL_S, MAX_INTERVAL_S
from cwctl.config import tomlfile
from cwctl.config.tomlcheck import TomlChecker
from cwctl.errors import InputError

# What a suspect may be (a snapshot's suspect kinds, and "gpu": a host whose GPU verdict
# is fail) and which actions fit each: a reroute goes round a switch, link or NIC; a
# steer moves the hosts' new connections off a spine or link; a drain takes a host out
# of the scheduler.
ACTIONS: Final = {
    "reroute": ("switch", "link", "nic"),  # the switches' ECMP groups (the model in --sim)
    "steer": ("switch", "link"),  # source ports at the hosts (reroute --at hosts)
    "drain": ("host", "gpu"),
}
KINDS: Final = ("switch", "link", "nic", "host", "gpu")

# The guard rails' defaults (each key of [act], written once).
ROUNDS: Final = 3
MIN_SCORE: Final = 0.5
MAX_PER_HOUR: Final = 4
HOLD_S: Final = 600.0
RESTORE: Final = True

# [rebalance]'s defaults (target, min_gain and interval_s: the action's own)
FLOW_HOLD_S: Final = 600.0
EVERY_S: Final = 30.0

_TOP_KEYS = ("dry_run", "protect", "act", "allow", "rebalance")
_REBALANCE_KEYS = ("target", "min_gain", "flow_hold_s", "every_s", "interval_s")
_ACT_KEYS = ("rounds", "min_score", "max_per_hour", "hold_s", "restore", "job_log")
_ALLOW_KEYS = ("kind", "action", "match")
_PATTERN = re.compile(r"^[A-Za-z0-9_*?\[\]/.!-]+$")
# a job's mark (cwctl.jobs: Slurm's comment and QoS, a pod's label:KEY), =VALUE optional
_PROTECT = re.compile(r"^(comment|qos|label:[A-Za-z0-9][A-Za-z0-9_./-]*)(=[^\n]*)?$")


class PolicyError(InputError):
    """One or more problems in a policy file; ``problems`` has one line each."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("\n".join(problems))


@dataclass(frozen=True)
class Allow:
    """One ``[[allow]]``: suspects of ``kind`` (whose name fits ``match``) get ``action``."""

    kind: str
    action: str
    match: tuple[str, ...] = ()

    def fits(self, kind: str, element: str) -> bool:
        if kind != self.kind:
            return False
        return not self.match or any(fnmatch.fnmatchcase(element, p) for p in self.match)


@dataclass(frozen=True)
class Rebalancing:
    """``[rebalance]``: the watch spreads colliding elephant flows, within guard rails."""

    target: float = TARGET
    min_gain: float = MIN_GAIN
    flow_hold_s: float = FLOW_HOLD_S  # at most one move per flow in this long
    every_s: float = EVERY_S  # at most one measurement (and plan) in this long
    interval_s: float = INTERVAL_S


@dataclass(frozen=True)
class Policy:
    """What the watch may do on its own; ``Policy()`` allows nothing."""

    dry_run: bool = False
    rounds: int = ROUNDS
    min_score: float = MIN_SCORE
    max_per_hour: int = MAX_PER_HOUR
    hold_s: float = HOLD_S
    restore: bool = RESTORE
    job_log: str | None = None  # the job's step logs on the hosts (cwctl.jobs.stephook)
    allow: tuple[Allow, ...] = ()
    protect: tuple[str, ...] = ()  # job marks a plan may not touch (cwctl.jobs.affected)
    rebalance: Rebalancing | None = None  # None: no [rebalance], flows are never spread
    path: Path | None = field(default=None, compare=False)

    def action_for(self, kind: str, element: str) -> str | None:
        """The action the first fitting ``[[allow]]`` names, or None: not to be acted on."""
        for rule in self.allow:
            if rule.fits(kind, element):
                return rule.action
        return None


def parse_policy(text: str, *, label: str = "policy") -> Policy:
    """Validate policy TOML text; ``label`` names it in problems (usually its path)."""
    try:
        doc = tomlfile.parse(text, label)
    except tomlfile.TomlFileError as exc:
        raise PolicyError([exc.problem]) from None
    c = TomlChecker(label, text)
    c.unknown_keys(doc, "", _TOP_KEYS)
    dry_run = doc.get("dry_run", False)
    if not isinstance(dry_run, bool):
        c.problem("dry_run", f"must be true or false, not {dry_run!r}")
    act = c.table(doc, "act")
    c.unknown_keys(act, "act", _ACT_KEYS)
    rounds = c.integer(act, "act", "rounds", 1, 1000)
    min_score = _score(c, act)
    max_per_hour = c.integer(act, "act", "max_per_hour", 0, 3600)
    hold_s = c.positive(act, "act", "hold_s")
    restore = c.boolean(act, "act", "restore")
    job_log = act.get("job_log")
    if job_log is not None and (not isinstance(job_log, str) or not job_log.startswith("/")):
        c.problem("act.job_log", f"must be an absolute path or glob, not {job_log!r}")
    allow = tuple(_allow(c, where, t) for where, t in c.array_of_tables(doc, "allow"))
    protect = c.names(
        doc, "", "protect", _PROTECT, "a job mark: comment[=TEXT], qos[=NAME], label:KEY[=VALUE]"
    )
    rebalance = _rebalance(c, doc)
    if c.problems:
        raise PolicyError(c.problems)
    return Policy(
        dry_run=bool(dry_run),
        rounds=ROUNDS if rounds is None else rounds,
        min_score=MIN_SCORE if min_score is None else min_score,
        max_per_hour=MAX_PER_HOUR if max_per_hour is None else max_per_hour,
        hold_s=HOLD_S if hold_s is None else hold_s,
        restore=RESTORE if restore is None else restore,
        job_log=job_log if isinstance(job_log, str) else None,
        allow=tuple(a for a in allow if a is not None),
        protect=tuple(protect or ()),
        rebalance=rebalance,
    )


def _rebalance(c: TomlChecker, doc: Mapping[str, Any]) -> Rebalancing | None:
    if "rebalance" not in doc:
        return None
    t = c.table(doc, "rebalance")
    c.unknown_keys(t, "rebalance", _REBALANCE_KEYS)
    target = c.positive(t, "rebalance", "target")
    if target is not None and target < 1:
        c.problem("rebalance.target", f"must be at least 1 (max/mean), not {target:g}")
        target = None
    min_gain = c.positive(t, "rebalance", "min_gain")
    if min_gain is not None and min_gain >= (target or TARGET):
        c.problem("rebalance.min_gain", f"must be under the target, not {min_gain:g}")
        min_gain = None
    got = {
        "target": target,
        "min_gain": min_gain,
        "flow_hold_s": c.positive(t, "rebalance", "flow_hold_s"),
        "every_s": c.positive(t, "rebalance", "every_s"),
        "interval_s": c.positive(t, "rebalance", "interval_s", MAX_INTERVAL_S),
    }
    return Rebalancing(**{k: v for k, v in got.items() if v is not None})


def _score(c: TomlChecker, act: Mapping[str, Any]) -> float | None:
    value = act.get("min_score")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        c.problem("act.min_score", f"must be a number from 0 to 1, not {value!r}")
        return None
    return float(value)


def _allow(c: TomlChecker, where: str, t: Mapping[str, Any]) -> Allow | None:
    c.unknown_keys(t, where, _ALLOW_KEYS)
    have_kind = c.required(t, where, "kind")
    have_action = c.required(t, where, "action")
    kind = c.choice(t, where, "kind", KINDS) if have_kind else None
    action = c.choice(t, where, "action", tuple(ACTIONS)) if have_action else None
    match = c.names(t, where, "match", _PATTERN, "a name pattern (letters, digits, * ? [ ])")
    if kind is None or action is None:
        return None
    if kind not in ACTIONS[action]:
        fits = " or ".join(a for a, kinds in ACTIONS.items() if kind in kinds)
        c.problem(f"{where}.action", f"{action!r} cannot act on a {kind} (a {kind} takes {fits})")
        return None
    return Allow(kind, action, match or ())


def load_policy(path: str | Path) -> Policy:
    """Read and validate a policy file; raise ``PolicyError`` listing every problem."""
    path = Path(path)
    label = str(path)
    try:  # a regular file of bounded size only: a FIFO or /dev/zero is refused, not read
        text = tomlfile.read_text(path, "policy file", tomlfile.POLICY_LIMIT)
    except tomlfile.TomlFileError as exc:
        raise PolicyError([exc.problem]) from None
    policy = parse_policy(text, label=label)
    return Policy(**{**policy.__dict__, "path": path})
