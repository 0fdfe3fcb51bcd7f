"""The TUI's bridge to ``cwctl.actions``: plan a reroute or a drain, apply it on yes.

When ``cwctl.actions`` offers no planning API, ``plan_action`` says so in a plan whose
``apply`` is ``None``: the TUI shows the text and applies nothing.
"""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

ActionKind = Literal["reroute", "drain"]


@dataclass(frozen=True)
class PlannedAction:
    kind: ActionKind
    target: str
    title: str
    text: str
    apply: Callable[[], Awaitable[str]] | None  # None: cannot be applied from here

    @property
    def available(self) -> bool:
        return self.apply is not None


def unavailable(kind: ActionKind, target: str, why: str) -> PlannedAction:
    asked = {
        "reroute": f"reroute traffic around {target}",
        "drain": f"drain {target} from the scheduler",
    }[kind]
    text = (
        f"Actions are unavailable: {why}.\n"
        "Nothing was planned and nothing will be applied.\n\n"
        f"What was asked: {asked}.\n"
        f"From a shell: cwctl {kind} {target}  (prints the plan; --apply carries it out)"
    )
    return PlannedAction(kind, target, f"{kind} {target}: unavailable", text, None)


def _planner() -> Any:
    try:
        return importlib.import_module("cwctl.actions.planner")
    except ImportError:
        return None


def plan_action(kind: ActionKind, target: str, source: Any) -> PlannedAction:
    """The plan for ``kind`` on ``target`` with the hosts ``source`` scans."""
    planner = _planner()
    if planner is None:
        return unavailable(kind, target, "cwctl.actions offers no planning API in this build")
    return unavailable(kind, target, "the TUI does not yet drive cwctl.actions.planner")
