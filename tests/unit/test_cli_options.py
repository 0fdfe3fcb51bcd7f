"""The shared flags: declared once, the same on every command that takes them, their
defaults from cwctl.settings."""

from __future__ import annotations

from typing import Any

import pytest
import typer.main

from cwctl import settings
from cwctl.cli import app
from cwctl.cli.options import FLAGS, SourceFlags, source_flags

SETTINGS_DEFAULTS = {
    "hosts": settings.SIM_HOSTS,
    "spines": settings.SIM_SPINES,
    "seed": settings.SIM_SEED,
    "load": settings.SIM_LOAD,
    "timestamps": settings.SIM_TIMESTAMPS,
}


def commands() -> dict[str, Any]:
    """The click commands typer builds for the app, by name."""
    return dict(typer.main.get_command(app).commands)  # type: ignore[attr-defined]


def test_every_shared_flag_is_declared_the_same_on_every_command() -> None:
    seen: dict[str, tuple[object, ...]] = {}
    for cmd in commands().values():
        for param in cmd.params:
            if param.name not in FLAGS:
                continue
            shape = (tuple(param.opts), param.default, param.envvar, param.help)
            assert seen.setdefault(param.name, shape) == shape, (cmd.name, param.name)
    assert {"inventory", "sim", "hosts", "fault", "replay"} <= set(seen)


def test_simulator_defaults_come_from_settings() -> None:
    scan = commands()["scan"]
    defaults = {p.name: p.default for p in scan.params}
    for name, value in SETTINGS_DEFAULTS.items():
        assert defaults[name] == value, name
    # hosts per leaf: the setting's, or --hosts when fewer (derived, so no default to show)
    per_leaf = next(p for p in scan.params if p.name == "hosts_per_leaf")
    assert per_leaf.default is None
    assert f"default {settings.SIM_HOSTS_PER_LEAF}, or --hosts if fewer" in per_leaf.help
    flags = SourceFlags()
    assert (flags.hosts, flags.seed, flags.timestamps.value) == (
        settings.SIM_HOSTS,
        settings.SIM_SEED,
        settings.SIM_TIMESTAMPS,
    )


def test_commands_take_the_source_flags_they_need() -> None:
    params = {name: {p.name for p in cmd.params} for name, cmd in commands().items()}
    assert {"replay", "save_records", "local"} <= params["scan"]
    assert {"replay", "local"} <= params["tui"]  # tui --replay reviews a saved scan
    assert {"sim", "hosts", "fault", "duration"} <= params["reroute"]
    assert "fault" not in params["resume"]


def test_asking_for_a_flag_that_does_not_exist_fails_at_import() -> None:
    with pytest.raises(ValueError, match="no shared flag"):
        source_flags("hostz")
