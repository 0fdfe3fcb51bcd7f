"""Plans as data: exact argument lists, quoting of hostile names, what planning refuses."""

from __future__ import annotations

import json
import shlex

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cwctl.actions import k8s, nccl, route, slurm
from cwctl.actions.inventorytarget import InventoryTarget
from cwctl.actions.plan import ActionPlan, Step, format_plan, with_sudo
from cwctl.actions.planner import RouteOptions, plan_drain, plan_reroute, resolve
from cwctl.actions.runners import CommandResult
from cwctl.actions.simulated import SimTarget
from cwctl.errors import InputError
from cwctl.inventory import Host, Inventory, Scheduler, Switch
from cwctl.sim.model import FabricModel

HOSTILE = "'; rm -rf / #"


def inventory(kind: str = "slurm", where: str | None = "slurm-ctl") -> Inventory:
    return Inventory(
        hosts=(
            Host("gpu-001", "10.0.1.1", leaf="leaf1", nics=("mlx5_0", "mlx5_1")),
            Host("gpu-002", "10.0.1.2", leaf="leaf1", nics=("mlx5_0", "mlx5_1")),
            Host("gpu-003", "10.0.2.1", leaf="leaf2", nics=("mlx5_0",)),
        ),
        switches=(
            Switch("spine1", "spine"),
            Switch("spine2", "spine"),
            Switch("leaf1", "leaf", ("spine1", "spine2")),
            Switch("leaf2", "leaf", ("spine1",)),
        ),
        scheduler=Scheduler(kind, where),
    )


class FakeHosts:
    """Answers the reads planning makes (a runner for planning only, never for applying)."""

    def __init__(self, answers: dict[str, str]) -> None:
        self.answers = answers
        self.calls: list[tuple[str, list[str]]] = []

    async def run(self, host: str, argv: list[str]) -> CommandResult:
        self.calls.append((host, list(argv)))
        return CommandResult(0, self.answers.get(host, "[]"))

    async def apply_change(self, change: dict) -> CommandResult:  # pragma: no cover
        raise AssertionError("planning applies nothing")

    async def close(self) -> None:
        return None


def test_slurm_argv_is_exact_and_hostile_reason_stays_one_element() -> None:
    (step,) = slurm.drain_steps("slurm-ctl", "gpu-001", HOSTILE)
    assert list(step.argv) == [
        "scontrol",
        "update",
        "NodeName=gpu-001",
        "State=DRAIN",
        f"Reason={HOSTILE}",
    ]
    assert list(step.undo_argv or ()) == ["scontrol", "update", "NodeName=gpu-001", "State=RESUME"]
    # what goes over SSH: the remote shell splits it back into exactly these arguments
    assert shlex.split(shlex.join(step.argv)) == list(step.argv)


def test_k8s_cordon_and_evict() -> None:
    steps = k8s.drain_steps("local", "gpu-001", "why", evict=True)
    assert [list(s.argv) for s in steps] == [
        ["kubectl", "cordon", "gpu-001"],
        ["kubectl", "annotate", "node", "gpu-001", "cwctl.io/drain-reason=why",
         "cwctl.io/suspect=gpu-001", "--overwrite"],
        ["kubectl", "taint", "node", "gpu-001", "cwctl.io/drained=gpu-001:NoSchedule",
         "--overwrite"],
        ["kubectl", "drain", "gpu-001", "--ignore-daemonsets"],
    ]  # fmt: skip
    assert list(steps[0].undo_argv or ()) == ["kubectl", "uncordon", "gpu-001"]
    assert steps[3].undo_argv is None and not steps[3].reversible


MULTIPATH = json.dumps(
    [
        {
            "dst": "10.0.0.0/8",
            "flags": [],
            "nexthops": [
                {"gateway": "10.9.1.1", "dev": "eth0", "weight": 1, "flags": []},
                {"gateway": "10.9.2.1", "dev": "eth1", "weight": 1, "flags": []},
            ],
        }
    ]
)


def test_route_reweight_argv_and_undo() -> None:
    current = route.parse_route(MULTIPATH, "10.0.0.0/8", "gpu-001")
    step = route.reweight_step("gpu-001", current, {"10.9.2.1": "spine2"}, "spine2")
    assert step is not None
    assert list(step.argv) == [
        "ip", "route", "replace", "10.0.0.0/8",
        "nexthop", "via", "10.9.1.1", "dev", "eth0", "weight", "1",
    ]  # fmt: skip
    assert list(step.undo_argv or ()) == [
        "ip", "route", "replace", "10.0.0.0/8",
        "nexthop", "via", "10.9.1.1", "dev", "eth0", "weight", "1",
        "nexthop", "via", "10.9.2.1", "dev", "eth1", "weight", "1",
    ]  # fmt: skip
    assert route.reweight_step("gpu-001", current, {"10.7.7.7": "spine9"}, "spine9") is None
    with pytest.raises(InputError, match="cut the host off"):
        route.reweight_step("gpu-001", current, {"10.9.1.1": "s", "10.9.2.1": "s"}, "s")


def test_route_single_path_undo_keeps_metric_proto_and_src() -> None:
    text = json.dumps(
        [
            {
                "dst": "10.0.0.0/8",
                "gateway": "10.9.1.1",
                "dev": "eth0",
                "metric": 5,
                "protocol": "static",
                "prefsrc": "10.0.1.1",
            }
        ]
    )
    current = route.parse_route(text, "10.0.0.0/8", "h")
    assert route.replace_argv(current) == (
        "ip", "route", "replace", "10.0.0.0/8", "metric", "5", "proto", "static",
        "src", "10.0.1.1", "via", "10.9.1.1", "dev", "eth0",
    )  # fmt: skip
    with pytest.raises(InputError, match="no route"):
        route.parse_route("[]", "10.0.0.0/8", "h")


async def test_real_reroute_without_route_data_names_what_is_missing() -> None:
    target = InventoryTarget(inventory())
    with pytest.raises(InputError) as err:
        await plan_reroute("spine2", target, FakeHosts({}), RouteOptions())
    assert "--prefix" in str(err.value) and "--gateway spine2=ADDRESS" in str(err.value)
    assert err.value.exit_code == 2


async def test_real_reroute_of_a_spine_reads_routes_on_the_hosts_it_serves() -> None:
    hosts = FakeHosts({"gpu-001": MULTIPATH, "gpu-002": MULTIPATH})
    options = RouteOptions(prefix="10.0.0.0/8", gateways=route.parse_gateways(["spine2=10.9.2.1"]))
    plan = await plan_reroute("spine2", InventoryTarget(inventory()), hosts, options)
    # leaf2 has no uplink to spine2: gpu-003 is not touched
    assert [c[0] for c in hosts.calls] == ["gpu-001", "gpu-002"]
    assert hosts.calls[0][1] == ["ip", "-j", "route", "show", "10.0.0.0/8"]
    assert [s.host for s in plan.steps] == ["gpu-001", "gpu-002"]
    assert "10.9.2.1" not in plan.steps[0].argv


async def test_nic_reroute_plans_an_nccl_exclusion_with_the_value_read() -> None:
    read = json.dumps({"exists": True, "value": "^=mlx5_3"})
    hosts = FakeHosts({"gpu-001": read})
    plan = await plan_reroute(
        "gpu-001/mlx5_1",
        InventoryTarget(inventory()),
        hosts,
        RouteOptions(nccl_conf="/x/n.conf"),
    )
    (step,) = plan.steps
    assert step.host == "gpu-001"
    assert list(step.argv) == [
        "python3", "-c", nccl.SET_PROGRAM, "/x/n.conf", "NCCL_IB_HCA", "^=mlx5_3,mlx5_1",
        "=^=mlx5_3", f"/x/n.conf.cwctl-{plan.id}",
    ]  # fmt: skip
    assert list(step.undo_argv or ()) == [
        "python3", "-c", nccl.RESTORE_PROGRAM, "/x/n.conf", f"/x/n.conf.cwctl-{plan.id}",
        "NCCL_IB_HCA", "^=mlx5_3,mlx5_1",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("current", "expected"),
    [
        (None, "^=mlx5_1"),
        ("", "^=mlx5_1"),
        ("^=mlx5_0", "^=mlx5_0,mlx5_1"),
        ("^=mlx5_1:1", None),
        ("=mlx5_0,mlx5_1:1", "=mlx5_0"),
        ("=mlx5_0", None),
        ("^mlx5_1", None),
        ("^mlx4", "^mlx4,mlx5_1"),
        ("mlx4", None),
    ],
)
def test_nccl_excluded_value(current: str | None, expected: str | None) -> None:
    assert nccl.excluded_value(current, "mlx5_1", key="NCCL_IB_HCA", host="h") == expected


@pytest.mark.parametrize("current", ["=mlx5_1", "mlx5", "mlx5_1"])
def test_nccl_refuses_values_it_cannot_rewrite_safely(current: str) -> None:
    with pytest.raises(InputError):
        nccl.excluded_value(current, "mlx5_1", key="NCCL_IB_HCA", host="h")


def test_nccl_prefix_exclusion_that_would_catch_another_nic_is_refused() -> None:
    with pytest.raises(InputError, match="mlx5_10"):
        nccl.excluded_value("^mlx4", "mlx5_1", key="NCCL_IB_HCA", host="h", others=("mlx5_10",))


def test_setting_for_hca_or_interface() -> None:
    assert nccl.setting_for("mlx5_1") == "NCCL_IB_HCA"
    assert nccl.setting_for("eth1") == "NCCL_SOCKET_IFNAME"


def test_drain_plan_runs_where_the_scheduler_is_and_refuses_none() -> None:
    plan = plan_drain("gpu-002", InventoryTarget(inventory()), reason=HOSTILE)
    assert [s.host for s in plan.steps] == ["slurm-ctl"]
    assert plan.steps[0].argv[-1] == f"Reason={HOSTILE}"
    local = plan_drain("gpu-002", InventoryTarget(inventory("k8s", None)), reason="r")
    assert [(s.host, list(s.argv)[:2]) for s in local.steps] == [
        ("local", ["kubectl", "cordon"]),
        ("local", ["kubectl", "annotate"]),
        ("local", ["kubectl", "taint"]),
    ]
    with pytest.raises(InputError, match="kind is 'none'"):
        plan_drain("gpu-002", InventoryTarget(inventory("none", None)), reason="r")
    with pytest.raises(InputError, match="no host named 'gpu-009'"):
        plan_drain("gpu-009", InventoryTarget(inventory()), reason="r")


def test_plan_round_trips_through_json_and_inverse_swaps() -> None:
    (step,) = slurm.drain_steps("slurm-ctl", "gpu-001", HOSTILE)
    plan = ActionPlan(kind="drain", element="gpu-001", reason=HOSTILE, steps=[step])
    again = ActionPlan.from_json(json.loads(json.dumps(plan.to_json())))
    assert again == plan
    inv = step.inverse()
    assert inv.argv == step.undo_argv and inv.undo_argv == step.argv
    text = format_plan(plan)
    assert shlex.join(step.argv) in text and plan.id in text


def test_programs_are_elided_unless_full() -> None:
    step = nccl.exclude_step(
        "h", python="python3", path="/etc/nccl.conf", key="NCCL_IB_HCA", current=None,
        new="^=mlx5_1", backup="/etc/nccl.conf.cwctl-1",
    )  # fmt: skip
    plan = ActionPlan(kind="reroute", element="h/mlx5_1", reason="r", steps=[step])
    short = format_plan(plan)
    assert "line program, -v shows it> /etc/nccl.conf NCCL_IB_HCA '^=mlx5_1' unset" in short
    assert "import os" not in short
    assert shlex.join(step.argv) in format_plan(plan, full=True)


def test_names_resolve_in_an_inventory() -> None:
    target = InventoryTarget(inventory())
    assert resolve("spine2", target).kind == "switch"
    assert resolve("spine2-leaf1", target).name == "leaf1-spine2"
    assert resolve("gpu-001/mlx5_1", target).nic == "mlx5_1"
    assert resolve("gpu-001-leaf1", target).host == "gpu-001"
    with pytest.raises(InputError, match="no element 'leaf2-spine2'"):
        resolve("leaf2-spine2", target)
    with pytest.raises(InputError, match="no NIC"):
        resolve("gpu-003/mlx5_1", target)


def small_model() -> FabricModel:
    return FabricModel.leaf_spine(8, 4, 2, seed=3)


async def test_sim_reroute_of_a_spine_sets_weight_zero_per_leaf() -> None:
    model = small_model()
    plan = await plan_reroute("spine2", SimTarget(model), FakeHosts({}))
    assert [s.change for s in plan.steps] == [
        {"op": "ecmp_weight", "leaf": "leaf1", "spine": "spine2", "weight": 0},
        {"op": "ecmp_weight", "leaf": "leaf2", "spine": "spine2", "weight": 0},
    ]
    assert all(s.undo_change and s.undo_change["weight"] == 1 for s in plan.steps)
    link = await plan_reroute("spine2-leaf1", SimTarget(model), FakeHosts({}))
    assert link.element == "leaf1-spine2" and len(link.steps) == 2 and link.notes


async def test_sim_refusals() -> None:
    model = small_model()
    with pytest.raises(InputError, match="is a leaf"):
        await plan_reroute("leaf1", SimTarget(model), FakeHosts({}))
    with pytest.raises(InputError, match="last NIC"):
        await plan_reroute("gpu-001/mlx5_0", SimTarget(model), FakeHosts({}))
    model.apply(*[])
    from cwctl.sim.model import SetEcmpWeight

    model.apply(SetEcmpWeight("spine1", 0))
    with pytest.raises(InputError, match="last spine"):
        await plan_reroute("spine2", SimTarget(model), FakeHosts({}))


async def test_sim_reroute_of_a_host_is_a_drain() -> None:
    plan = await plan_reroute("gpu-002", SimTarget(small_model()), FakeHosts({}))
    assert [s.change for s in plan.steps] == [{"op": "drain_host", "host": "gpu-002"}]
    assert "draining gpu-002" in plan.notes[0]


def test_step_json_keeps_a_hostile_argv_as_a_list() -> None:
    step = Step("h", "d", argv=("echo", HOSTILE), undo_argv=("true",))
    data = json.loads(json.dumps(step.to_json()))
    assert data["argv"] == ["echo", HOSTILE]
    assert Step.from_json(data) == step


@settings(max_examples=60, deadline=None)
@given(reason=st.text(alphabet=st.characters(blacklist_characters="\x00"), max_size=40))
def test_any_reason_survives_the_remote_shell_as_one_argument(reason: str) -> None:
    (step,) = slurm.drain_steps("slurm-ctl", "gpu-001", reason)
    assert step.argv[-1] == f"Reason={reason}"
    assert shlex.split(shlex.join(step.argv)) == list(step.argv)


@settings(max_examples=60, deadline=None)
@given(
    items=st.lists(st.sampled_from(["mlx5_0", "mlx5_1", "mlx5_2:1", "mlx4_0"]), max_size=4),
    mode=st.sampled_from(["^=", "="]),
)
def test_exact_lists_never_leave_the_nic_in_use(items: list[str], mode: str) -> None:
    current = mode + ",".join(items) if items else None
    try:
        new = nccl.excluded_value(current, "mlx5_1", key="NCCL_IB_HCA", host="h")
    except InputError:
        assert mode == "=" and {i.split(":")[0] for i in items} == {"mlx5_1"}
        return
    value = new if new is not None else (current or "")
    names = {i.split(":")[0] for i in value.lstrip("^=").split(",") if i}
    if value.startswith("^=") or not value:
        assert "mlx5_1" in names or (new is None and not value)
    else:
        assert "mlx5_1" not in names


def test_sudo_wraps_commands_and_undos_not_sim_changes() -> None:
    plan = plan_drain("gpu-002", InventoryTarget(inventory()), reason="r")
    plan.steps.append(Step("sim", "d", change={"op": "drain_host", "host": "x"}))
    with_sudo(plan)
    assert plan.steps[0].argv[:4] == ("sudo", "-n", "--", "scontrol")
    assert (plan.steps[0].undo_argv or ())[:4] == ("sudo", "-n", "--", "scontrol")
    assert plan.steps[1].argv == () and plan.steps[1].change is not None


async def test_the_readme_reroute_example_plans() -> None:
    """README's host-route reroute, its flags as written there: the gateways name the
    suspect's next hop, so a plan is made that drops exactly that one."""
    import re
    import shlex
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    line = next(x for x in readme.splitlines() if x.startswith("cwctl reroute "))
    args = shlex.split(line.split("  #", 1)[0])
    element = args[2]
    prefix = args[args.index("--prefix") + 1]
    gateways = [args[i + 1] for i, a in enumerate(args) if a == "--gateway"]
    by_spine = dict(g.split("=", 1) for g in gateways)
    answer = json.dumps(
        [
            {
                "dst": prefix,
                "flags": [],
                "nexthops": [
                    {"gateway": by_spine["spine1"], "dev": "eth0", "weight": 1, "flags": []},
                    {"gateway": by_spine["spine2"], "dev": "eth1", "weight": 1, "flags": []},
                ],
            }
        ]
    )
    hosts = FakeHosts({"gpu-001": answer, "gpu-002": answer})
    options = RouteOptions(prefix=prefix, gateways=route.parse_gateways(gateways))
    plan = await plan_reroute(element, InventoryTarget(inventory()), hosts, options)
    assert [s.host for s in plan.steps] == ["gpu-001", "gpu-002"]
    assert by_spine[element] not in plan.steps[0].argv  # the suspect's next hop is dropped
    assert by_spine["spine1"] in plan.steps[0].argv
    assert re.fullmatch(r"\d+\.\d+\.\d+\.\d+/\d+", prefix)
