"""The ``replay`` source: a saved record file (``--save-records``) instead of probing."""

from __future__ import annotations

from cwctl.scan.collection import Collection
from cwctl.scan.recordfile import read_collection
from cwctl.scan.request import Progress, ScanRequest


class ReplaySource:
    """Every scan reads the same file: the analysis of saved records, again."""

    name = "replay"

    def __init__(self, request: ScanRequest) -> None:
        assert request.replay is not None
        self.path = request.replay

    async def scan(self, request: ScanRequest, progress: Progress | None = None) -> Collection:
        return read_collection(self.path)

    async def aclose(self) -> None:
        """Nothing held open between scans."""
