"""A watch policy's ``protect``: a plan that touches a running job so marked is not
applied (nothing journalled, the fabric unchanged); other plans go ahead. On the
simulated fabric with its seeded job set (``--sim --jobs 6``: job 4100 spans leaves 2
and 3 and carries ``comment = protected``)."""

from __future__ import annotations

from cwctl.actions.journal import Journal
from cwctl.scan.request import ScanRequest, SimOptions
from cwctl.watch.policy import Allow, Policy, parse_policy
from cwctl.watch.rounds import Watch

ALLOW = (Allow("link", "reroute", ("leaf*-spine*",)),)


class Clock:
    t = 0.0

    def __call__(self) -> float:
        return self.t


async def decisions_under(protect: tuple[str, ...]) -> tuple[list[tuple[str, str]], Watch]:
    sim = SimOptions(hosts=32, faults=("link:leaf1-spine2:down",), jobs=6)
    clock = Clock()
    policy = Policy(rounds=1, hold_s=30.0, allow=ALLOW, protect=protect)
    watch = Watch(ScanRequest(sim=sim, duration_s=1.0), policy=policy, clock=clock)
    out = []
    try:
        for _ in range(2):
            clock.t += 10.0
            snapshot = await watch.scan()
            assert snapshot is not None and snapshot.jobs == {"scheduler": "sim", "running": 6}
            out += [(d.verb, d.code) for d in await watch.decide(snapshot) if d.verb != "held"]
    finally:
        await watch.session.aclose()
    return out, watch


async def test_a_plan_touching_a_protected_job_is_not_applied() -> None:
    seen, watch = await decisions_under(("comment=protected",))
    assert ("failed", "protected") in seen and ("acted", "verified") not in seen
    assert not watch.session.model.state.ecmp_weight  # nothing changed in the fabric
    assert not Journal().read().entries  # nor journalled


async def test_without_a_matching_mark_it_acts() -> None:
    seen, watch = await decisions_under(("label:team=infra",))
    assert ("acted", "verified") in seen
    assert 0 in watch.session.model.state.ecmp_weight.values()


def test_the_policy_names_marks_only() -> None:
    assert parse_policy('protect = ["qos=high", "comment"]').protect == ("qos=high", "comment")
    for bad in ('protect = ["owner=bob"]', "protect = [3]", 'protect = "qos=high"'):
        try:
            parse_policy(bad)
        except Exception as exc:  # PolicyError: one line naming the key
            assert "key 'protect" in str(exc), str(exc)
        else:
            raise AssertionError(f"{bad} was accepted")
