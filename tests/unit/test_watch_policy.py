"""The watch policy file: every key read, every problem one line naming file, line, key."""

from __future__ import annotations

from pathlib import Path

import pytest

from cwctl.watch import policy as P
from cwctl.watch.policy import Allow, PolicyError, load_policy, parse_policy

REPO = Path(__file__).resolve().parents[2]

GOOD = """\
dry_run = true

[act]
rounds = 2
min_score = 0.7
max_per_hour = 3
hold_s = 120
restore = false

[[allow]]
kind = "link"
action = "reroute"
match = ["leaf*-spine*"]

[[allow]]
kind = "gpu"
action = "drain"
"""


def test_a_full_policy_reads_as_written() -> None:
    p = parse_policy(GOOD)
    assert (p.dry_run, p.rounds, p.min_score, p.max_per_hour, p.hold_s, p.restore) == (
        True,
        2,
        0.7,
        3,
        120.0,
        False,
    )
    assert p.allow == (Allow("link", "reroute", ("leaf*-spine*",)), Allow("gpu", "drain"))
    assert p.action_for("link", "leaf2-spine1") == "reroute"
    assert p.action_for("link", "gpu-001-leaf1") is None  # an access link: no pattern fits
    assert p.action_for("switch", "spine1") is None
    assert p.action_for("gpu", "gpu-003") == "drain"


def test_an_empty_policy_allows_nothing_with_the_default_rails() -> None:
    p = parse_policy("")
    assert p.allow == () and not p.dry_run
    assert (p.rounds, p.min_score, p.max_per_hour, p.hold_s) == (
        P.ROUNDS,
        P.MIN_SCORE,
        P.MAX_PER_HOUR,
        P.HOLD_S,
    )


def problems(text: str) -> list[str]:
    with pytest.raises(PolicyError) as info:
        parse_policy(text, label="p.toml")
    return info.value.problems


def test_every_problem_names_its_line_and_key_all_at_once() -> None:
    text = """\
dry_run = "yes"
[act]
rounds = 0
min_score = 1.5
hold_s = -1
houl_s = 5

[[allow]]
kind = "spine"
action = "reroute"

[[allow]]
kind = "host"
action = "reroute"

[[allow]]
action = "drain"
match = ["gpu 1"]
"""
    assert problems(text) == [
        "p.toml:1: key 'dry_run': must be true or false, not 'yes'",
        "p.toml:3: key 'act.rounds': must be between 1 and 1000, not 0",
        "p.toml:4: key 'act.min_score': must be a number from 0 to 1, not 1.5",
        "p.toml:5: key 'act.hold_s': must be a number > 0, not -1",
        "p.toml:6: key 'act.houl_s': unknown key (did you mean 'hold_s'?)",
        "p.toml:9: key 'allow[0].kind': must be one of switch | link | nic | host | gpu, "
        "not 'spine'",
        "p.toml:14: key 'allow[1].action': 'reroute' cannot act on a host (a host takes drain)",
        "p.toml:16: key 'allow[2]': missing required key 'kind'",
        "p.toml:18: key 'allow[2].match[0]': 'gpu 1' is not a name pattern "
        "(letters, digits, * ? [ ])",
    ]


def test_syntax_errors_and_unreadable_files_are_one_line(tmp_path: Path) -> None:
    assert problems("[act\n") == [
        "p.toml:1: TOML syntax error: Expected ']' at the end of a table declaration (column 5)"
    ]
    with pytest.raises(PolicyError, match=r"nope.toml: no such policy file"):
        load_policy(tmp_path / "nope.toml")
    with pytest.raises(PolicyError, match=r"is a directory"):
        load_policy(tmp_path)


def test_the_shipped_example_policy_loads() -> None:
    p = load_policy(REPO / "docs" / "watch-policy.example.toml")
    assert p.allow and p.path is not None
    assert p.rebalance == P.Rebalancing()  # every [rebalance] key shown with its default


def test_rebalance_is_off_unless_its_table_is_there_and_reads_as_written() -> None:
    assert parse_policy("").rebalance is None
    assert parse_policy("[rebalance]\n").rebalance == P.Rebalancing()
    r = parse_policy(
        "[rebalance]\ntarget = 1.5\nmin_gain = 0.2\nflow_hold_s = 60\nevery_s = 5\ninterval_s = 1\n"
    ).rebalance
    assert r == P.Rebalancing(target=1.5, min_gain=0.2, flow_hold_s=60.0, every_s=5.0,
                              interval_s=1.0)  # fmt: skip


def test_rebalance_problems_name_their_line_and_key() -> None:
    text = """\
[rebalance]
target = 0.9
min_gain = 3
flow_hold_s = 0
interval_s = 600
evry_s = 5
"""
    assert problems(text) == [
        "p.toml:2: key 'rebalance.target': must be at least 1 (max/mean), not 0.9",
        "p.toml:3: key 'rebalance.min_gain': must be under the target, not 3",
        "p.toml:4: key 'rebalance.flow_hold_s': must be a number > 0, not 0",
        "p.toml:5: key 'rebalance.interval_s': must be a number > 0 and at most 60, not 600",
        "p.toml:6: key 'rebalance.evry_s': unknown key (did you mean 'every_s'?)",
    ]
    assert problems("rebalance = 3\n") == [
        "p.toml:1: key 'rebalance': must be a table ([rebalance]), not an integer"
    ]
