"""docs/localisation.md's table of knobs names every field of ``Thresholds``, each with
its default: the page cannot drift from the code it documents."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from cwctl.telemetry import THRESHOLDS, Thresholds

DOC = Path(__file__).resolve().parents[2] / "docs" / "localisation.md"
ROW = re.compile(r"^\| `(\w+)` \| [^|]+ \| ([-+.\deE]+) \|", re.MULTILINE)


def test_the_knob_table_has_every_threshold_with_its_default() -> None:
    text = DOC.read_text()
    section = text[text.index("## Every knob") : text.index("## Sensitivity")]
    table = {name: float(default) for name, default in ROW.findall(section)}
    fields = {f.name: float(getattr(THRESHOLDS, f.name)) for f in dataclasses.fields(Thresholds)}
    assert table == fields
