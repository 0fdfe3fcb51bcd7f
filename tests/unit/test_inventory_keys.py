"""The inventory keys are declared once (the model's dataclass fields): the loader
accepts exactly those, and docs/inventory.md and inventory.example.toml show each one."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from cwctl.inventory import parse_inventory
from cwctl.inventory.model import SECTIONS, InventoryError, section_keys

ROOT = Path(__file__).resolve().parents[2]


def documented_keys() -> dict[str, list[str]]:
    """The keys of each section's table in docs/inventory.md."""
    out: dict[str, list[str]] = {}
    section = None
    for line in (ROOT / "docs" / "inventory.md").read_text().splitlines():
        heading = re.match(r"^## `\[+(\w+)\]+`", line)
        if heading:
            section = heading.group(1)
            out[section] = []
        elif line.startswith("## "):
            section = None
        elif section is not None:
            row = re.match(r"^\| `(\w+)` \|", line)
            if row:
                out[section].append(row.group(1))
    return out


@pytest.mark.parametrize("section", sorted(SECTIONS))
def test_docs_list_exactly_the_keys_of_each_section(section: str) -> None:
    assert documented_keys()[section] == list(section_keys(section))


@pytest.mark.parametrize("section", sorted(SECTIONS))
def test_example_inventory_shows_every_key(section: str) -> None:
    text = (ROOT / "inventory.example.toml").read_text()
    doc = tomllib.loads(text)
    tables = doc[section] if isinstance(doc[section], list) else [doc[section]]
    used = {key for table in tables for key in table}
    if section == "probe":  # the budget's rate and window: shown commented, as set they pin
        used |= set(re.findall(r"^# (\w+) = ", text, re.MULTILINE))
    assert used == set(section_keys(section))


def test_a_key_outside_the_model_is_refused_in_every_section() -> None:
    base = '[[host]]\nname = "a"\naddress = "10.0.0.1"\n'
    for section in SECTIONS:
        if section == "host":
            text = base.replace('address = "10.0.0.1"\n', 'address = "10.0.0.1"\nbogus = 1\n')
        elif section == "switch":
            text = base + '[[switch]]\nname = "s"\nrole = "spine"\nbogus = 1\n'
        else:
            text = f"[{section}]\nbogus = 1\n" + base
        with pytest.raises(InventoryError, match="bogus"):
            parse_inventory(text)
