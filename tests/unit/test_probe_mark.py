"""The probes that keep crossing an element a switch-side reroute avoids: the agent marks
every probe socket with the TOS byte it is given, and the watch asks for the mark exactly
while a reroute it made is in place (its checks of an action stay unmarked)."""

from __future__ import annotations

import socket

from cwctl import settings
from cwctl.probe.params import AgentParams
from cwctl.probe.rails import Rails
from cwctl.scan.request import ScanRequest, SimOptions
from cwctl.watch.policy import Allow, Policy
from cwctl.watch.rounds import Watch


def _tos(sock: socket.socket) -> int:
    return sock.getsockopt(socket.IPPROTO_IP, socket.IP_TOS)


def test_every_probe_socket_carries_the_mark_it_is_given() -> None:
    marked = Rails(
        AgentParams({"bind": "127.0.0.1", "ports": 3, "tos": settings.PROBE_OBSERVE_TOS})
    )
    plain = Rails(AgentParams({"bind": "127.0.0.1", "ports": 3}))
    try:
        assert {_tos(s) for s in marked.all_sockets()} == {settings.PROBE_OBSERVE_TOS}
        assert {_tos(s) for s in plain.all_sockets()} == {0}
        assert len(marked.all_sockets()) == 4  # the answering socket and 3 source sockets
    finally:
        for s in (*marked.all_sockets(), *plain.all_sockets()):
            s.close()


async def service_round(watch: Watch) -> None:
    """A round as ``cwctl watch``'s loop runs one (watch/service.py): scan, then decide."""
    snapshot = await watch.scan()
    assert snapshot is not None
    await watch.decide(snapshot)


async def test_the_watch_marks_its_rounds_while_its_reroute_is_in_place() -> None:
    request = ScanRequest(
        sim=SimOptions(hosts=32, faults=("link:leaf1-spine2:down",)), duration_s=1
    )
    watch = Watch(
        request, policy=Policy(rounds=1, hold_s=3600.0, allow=(Allow("link", "reroute"),))
    )
    try:
        await service_round(watch)  # named, acted on
        assert "leaf1-spine2" in watch.decider.acted_on  # type: ignore[union-attr]
        assert watch.session.request.probe_tos == 0  # the round that acted was unmarked
        await service_round(watch)
        assert watch.session.request.probe_tos == settings.PROBE_OBSERVE_TOS
        assert watch.request.probe_tos == 0  # what the action's rescans are built from
        watch.decider.restored(0.0, "leaf1-spine2")  # type: ignore[union-attr]
        await service_round(watch)
        assert watch.session.request.probe_tos == 0
    finally:
        await watch.aclose()


def test_only_a_change_that_moves_the_probes_makes_the_watch_forget_their_paths() -> None:
    """A switch-side reroute keeps the marked probes on the routes as they were (its
    observe rule), host steering never moves them: the paths learnt before still hold.
    Host routes move them."""
    from cwctl.actions.plan import ActionPlan, Step
    from cwctl.actions.switchroute import observe_steps
    from cwctl.watch.act import keeps_probes

    route = {"dst": "10.0.2.0/24", "gateway": "10.0.0.2", "dev": "spine1"}
    observed = ActionPlan(kind="reroute", element="spine2", reason="", steps=[])
    observed.steps = observe_steps("leaf1", [route], 7326)
    assert keeps_probes(observed)
    steered = ActionPlan(kind="reroute", element="spine2", reason="", steps=[])
    steered.steering = {"moves": [{"host": "a"}]}
    assert keeps_probes(steered)
    hosts = ActionPlan(kind="reroute", element="spine2", reason="", steps=[])
    hosts.steps = [Step("gpu-001", "route via spine1", ("ip", "route", "replace", "x"))]
    assert not keeps_probes(hosts)
