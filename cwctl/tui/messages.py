"""The small messages the scan worker posts to the app."""

from __future__ import annotations

from dataclasses import dataclass

from textual.message import Message

from cwctl.scan.snapshot import FabricSnapshot


@dataclass
class ScanStarted(Message):
    number: int  # 1 for the first scan


@dataclass
class ScanFinished(Message):
    number: int
    snapshot: FabricSnapshot
    elapsed_s: float


@dataclass
class ScanFailed(Message):
    number: int
    error: str
    retry: bool = True  # False: bad input (an InputError); scanning again cannot help


@dataclass
class ScanProgressed(Message):
    """How the scan in flight is going, in words (``cwctl.report.progress``); a newer
    one replaces one not yet handled."""

    number: int
    words: str

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, ScanProgressed)
