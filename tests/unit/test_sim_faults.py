"""Fault specs of the simulator: syntax, defaults, names, and one-line errors."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cwctl.errors import InputError
from cwctl.sim import FabricModel, parse_fault
from cwctl.sim.faults import DEFAULT_VALUE, KINDS, MODES


@pytest.mark.parametrize(
    ("spec", "kind", "name", "mode", "value", "at_s"),
    [
        ("switch:spine2", "switch", "spine2", "down", None, 0.0),
        ("switch:spine2:down", "switch", "spine2", "down", None, 0.0),
        ("link:leaf1-spine2:lossy", "link", "leaf1-spine2", "lossy", 0.02, 0.0),
        ("link:leaf1-spine2:lossy=0.01", "link", "leaf1-spine2", "lossy", 0.01, 0.0),
        ("switch:leaf3:congested", "switch", "leaf3", "congested", 0.9, 0.0),
        ("switch:leaf3:congested=0.7@1.5", "switch", "leaf3", "congested", 0.7, 1.5),
        ("nic:gpu-001/mlx5_0:slow=2500", "nic", "gpu-001/mlx5_0", "slow", 2500.0, 0.0),
        ("host:gpu-004:flap=0.2@3", "host", "gpu-004", "flap", 0.2, 3.0),
        ("HOST:gpu-004:DOWN", "host", "gpu-004", "down", None, 0.0),
    ],
)
def test_parse_fault_accepts_every_documented_form(spec, kind, name, mode, value, at_s):
    fault = parse_fault(spec)
    assert (fault.kind, fault.name, fault.mode, fault.value, fault.at_s) == (
        kind,
        name,
        mode,
        value,
        at_s,
    )
    again = parse_fault(fault.spec)  # the normal form parses back to the same fault
    assert (again.kind, again.name, again.mode, again.value, again.at_s) == (
        kind,
        name,
        mode,
        value,
        at_s,
    )
    assert again.spec == fault.spec


@pytest.mark.parametrize(
    ("spec", "needle"),
    [
        ("spine2", "expected KIND:NAME"),
        ("switch:", "expected KIND:NAME"),
        ("router:spine2:down", "unknown kind 'router'"),
        ("switch:spine2:broken", "unknown mode 'broken'"),
        ("switch:spine2:down=1", "takes no value"),
        ("link:leaf1-spine2:lossy=2", "0 < P <= 1"),
        ("link:leaf1-spine2:lossy=abc", "must be a number"),
        ("switch:spine2:congested=1.0", "0 < LEVEL < 1"),
        ("switch:spine2:slow=-5", "NS > 0"),
        ("switch:spine2:flap=0", "PERIOD > 0"),
        ("switch:spine2:down@-1", ">= 0"),
        ("switch:spine2:down@soon", "must be a number"),
        ("switch:spine2:lossy=nan", "finite"),
    ],
)
def test_bad_fault_specs_are_one_line_input_errors_naming_the_spec(spec, needle):
    with pytest.raises(InputError) as err:
        parse_fault(spec)
    message = str(err.value)
    assert needle in message
    assert repr(spec) in message
    assert "\n" not in message


@pytest.mark.parametrize(
    ("spec", "needle"),
    [
        ("switch:spine9:down", "no switch named 'spine9' (e.g. spine1, spine2, spine3)"),
        ("link:leaf1-spine9", "no link named 'leaf1-spine9'"),
        ("nic:gpu-001/mlx5_7", "no nic named 'gpu-001/mlx5_7'"),
        ("host:gpu-999", "no host named 'gpu-999'"),
        ("switch:gpu-001", "no switch named 'gpu-001'"),
    ],
)
def test_unknown_element_names_are_input_errors(spec, needle):
    with pytest.raises(InputError) as err:
        FabricModel.leaf_spine(16, 4, 4, faults=[spec])
    assert needle in str(err.value)
    assert repr(spec) in str(err.value)


def test_every_element_kind_resolves_and_links_take_either_end_first():
    model = FabricModel.leaf_spine(
        16,
        4,
        4,
        faults=[
            "switch:leaf2",
            "switch:spine3",
            "link:leaf1-spine2",
            "link:spine2-leaf4",
            "link:gpu-005-leaf2",
            "nic:gpu-001/mlx5_0",
            "host:gpu-016",
        ],
    )
    names = [model.fabric.names[eid] for _, eid in model.faults]
    assert names == [
        "leaf2",
        "spine3",
        "leaf1-spine2",
        "leaf4-spine2",
        "gpu-005-leaf2",
        "gpu-001/mlx5_0",
        "gpu-016",
    ]


@settings(max_examples=60, deadline=None)
@given(
    kind=st.sampled_from(KINDS),
    name=st.from_regex(r"[a-z][a-z0-9/_-]{0,12}", fullmatch=True),
    mode=st.sampled_from(MODES),
    at_s=st.one_of(st.just(0.0), st.floats(0.001, 1e4)),
)
def test_the_normal_form_round_trips(kind, name, mode, at_s):
    value = DEFAULT_VALUE[mode]
    spec = f"{kind}:{name}:{mode}" + (f"@{at_s!r}" if at_s else "")
    fault = parse_fault(spec)
    assert (fault.kind, fault.name, fault.mode, fault.value) == (kind, name, mode, value)
    assert fault.at_s == pytest.approx(at_s)
    again = parse_fault(fault.spec)
    assert (again.kind, again.name, again.mode, again.value) == (kind, name, mode, value)


@settings(max_examples=80, deadline=None)
@given(st.text(max_size=30))
def test_arbitrary_text_parses_or_raises_input_error(text):
    try:
        fault = parse_fault(text)
    except InputError as err:
        assert "\n" not in str(err)
    else:
        assert fault.kind in KINDS and fault.mode in MODES


def test_silent_is_a_switch_mode_without_value_and_not_a_data_path_fault() -> None:
    assert parse_fault("switch:spine3:silent").mode == "silent"
    with pytest.raises(InputError, match="takes no value"):
        parse_fault("switch:spine3:silent=2")
    with pytest.raises(InputError, match="only a switch can be silent"):
        FabricModel.leaf_spine(16, 4, 4, faults=["host:gpu-001:silent"])
    model = FabricModel.leaf_spine(16, 4, 4, faults=["switch:spine3:silent"])
    window = model.probe(0.5)
    assert window.truth["faults"] == [] and window.table.complete.all()
