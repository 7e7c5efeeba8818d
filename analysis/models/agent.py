"""C13, C14, C15: the screenshot agent — rounds, where to run them, session migration.

* ``agent`` (C13): a round = upload screenshot (size·8/b) + terminal work + remote model + RTT.
  Compressing to ``compressed`` bytes with ``encode`` s of encoding changes the round time; it
  stays faster while the compressed run's rounds N' < N·round/round'.
* ``placement`` (C14): ``rounds`` rounds at each place of :data:`PLACES`; total = prep +
  rounds·(terminal + size·8/uplink + RTT + model); a place without uplink sends nothing.
  Cloud as a function of its uplink b: (prep + rounds·(terminal + RTT + model)) + rounds·size·8/b;
  it meets the deadline from b = rounds·size·8/(deadline − fixed).  One disconnect after round
  ``disconnect_after`` with ``reconnect`` s: keeping ``committed`` rounds redoes the others.
  ``cloud_uplinks`` b_1..b_n (one per round; one value = every round): the cloud's total is
  prep + Σ_i (terminal + size·8/b_i + RTT + model); a round is tied to its own rate, so a round
  done again after the disconnect uploads at its own b_i again.  ``cloud_uplink_equivalent`` is
  the constant b with the same total (the harmonic mean n / Σ 1/b_i): the list meets the deadline
  exactly when it is at least ``cloud_min_uplink``.
* ``migration`` (C15): moving a session costs M = state·8/rate + restore and saves Δt per round;
  G(N) = N·Δt − M, positive from round N = floor(M/Δt) + 1.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from analysis.models.base import Params, Q, param, register


@dataclass(frozen=True)
class AgentParams(Params):
    rounds: int = param(30, "count", "rounds", positive=True)
    screenshot: float = param(0.8e6, "B", "screenshot size")
    uplink: float = param(6.4e6, "bit/s", "uplink rate", positive=True)
    terminal: float = param(0.3, "s", "terminal work per round")
    model: float = param(2.0, "s", "remote model time per round")
    rtt: float = param(0.2, "s", "round-trip time")
    compressed: float = param(0.2e6, "B", "compressed screenshot size")
    encode: float = param(0.03, "s", "encoding time per round")


@register("agent", "C13", "screenshot agent: time per round and total, with compression", AgentParams)
def agent(p: AgentParams) -> dict[str, Q]:
    plain = p.screenshot * 8 / p.uplink + p.terminal + p.model + p.rtt
    comp = p.compressed * 8 / p.uplink + p.encode + p.terminal + p.model + p.rtt
    return {"round": Q(plain, "s", "one round"), "total": Q(p.rounds * plain, "s", "all rounds"),
            "compressed_round": Q(comp, "s", "one round, compressed"),
            "compressed_total": Q(p.rounds * comp, "s", "all rounds, compressed"),
            "break_even_rounds": Q(p.rounds * plain / comp, "rounds",
                                   "compression is faster while it needs fewer rounds than this")}


#: C14's places: prep s, model s/round, uplink bit/s (0 = nothing to send), RTT s.
PLACES = {"phone": (0.0, 2.90, 0.0, 0.0), "workstation": (0.27, 0.137, 80e6, 0.02),
          "cloud": (0.14, 0.073, 6.4e6, 0.20)}


@dataclass(frozen=True)
class PlacementParams(Params):
    rounds: int = param(20, "count", "remaining rounds", positive=True)
    screenshot: float = param(0.8e6, "B", "screenshot size")
    terminal: float = param(0.3, "s", "terminal work per round")
    deadline: float = param(45.0, "s", "deadline")
    cloud_uplink: float = param(6.4e6, "bit/s", "the cloud's uplink b", positive=True)
    cloud_uplinks: tuple | None = param(None, "bit/s list", "the cloud's uplink per round b_1..b_n: "
                                        "one value per round, or one for every round (default: "
                                        "cloud_uplink for every round)", positive=True)
    disconnect_after: int = param(10, "count", "rounds done when the cloud link drops")
    committed: int = param(9, "count", "of those, rounds whose results were kept")
    reconnect: float = param(1.0, "s", "reconnect time")


def uplinks(p: PlacementParams, name: str) -> tuple[float, ...]:
    """The uplink of each of the ``rounds`` rounds at a place (0: nothing to send)."""
    if name != "cloud":
        return (PLACES[name][2],) * p.rounds
    given = p.cloud_uplinks or (p.cloud_uplink,)
    if len(given) not in (1, p.rounds):
        raise ValueError(f"--cloud-uplinks has {len(given)} values for {p.rounds} rounds; "
                         f"give one (every round) or {p.rounds} (one per round)")
    return given * p.rounds if len(given) == 1 else given


def place_rounds(p: PlacementParams, name: str) -> tuple[float, list[float]]:
    """(prep, the time of each round) at a place: terminal + size·8/b_i + RTT + model."""
    prep, model, _, rtt = PLACES[name]
    return prep, [p.terminal + (p.screenshot * 8 / b if b else 0.0) + rtt + model
                  for b in uplinks(p, name)]


@register("placement", "C14", "where to run the remaining rounds: totals, cloud vs uplink, "
          "disconnects", PlacementParams)
def placement(p: PlacementParams) -> dict[str, Q]:
    if p.committed > p.disconnect_after or p.disconnect_after > p.rounds:
        raise ValueError("need --committed <= --disconnect-after <= --rounds")
    out = {}
    for name in PLACES:
        prep, per = place_rounds(p, name)
        out[f"total_{name}"] = Q(prep + sum(per), "s", f"{name}: prep + rounds")
        out[f"meets_{name}"] = Q(prep + sum(per) <= p.deadline, "bool", "within the deadline")
    prep, model, _, rtt = PLACES["cloud"]
    fixed = prep + p.rounds * (p.terminal + rtt + model)
    per_rate = p.rounds * p.screenshot * 8 / 1e6
    _, per = place_rounds(p, "cloud")
    total = out["total_cloud"].value
    out.update(
        cloud_fixed=Q(fixed, "s", "cloud total without the uploads"),
        cloud_upload_mbit=Q(per_rate, "Mbit", "cloud total = fixed + this / b (Mbit/s)"),
        cloud_min_uplink=Q(per_rate / (p.deadline - fixed) if p.deadline > fixed else math.inf,
                           "Mbit/s", "smallest b meeting the deadline"),
        cloud_uplink_equivalent=Q(p.rounds / sum(1e6 / b for b in uplinks(p, "cloud")), "Mbit/s",
                                  "the constant b with the cloud's total (n / Σ 1/b_i)"),
        disconnect_keep=Q(total + p.reconnect + sum(per[p.committed:p.disconnect_after]), "s",
                          "cloud, one disconnect, committed rounds kept (the others again, "
                          "each at its own uplink)"),
        disconnect_lose=Q(total + p.reconnect + sum(per[:p.disconnect_after]), "s",
                          "cloud, one disconnect, all rounds lost (again, each at its own uplink)"))
    return out


@dataclass(frozen=True)
class MigrationParams(Params):
    state: float = param(64 * 2**20, "B", "session state to move (64 MiB)")
    rate: float = param(80e6, "bit/s", "transfer rate", positive=True)
    restore: float = param(1.0, "s", "restore time at the destination")
    saving: float = param(0.4, "s", "Δt saved per round after the move", positive=True)


@register("migration", "C15", "session migration cost M and the round it pays off from",
          MigrationParams)
def migration(p: MigrationParams) -> dict[str, Q]:
    cost = p.state * 8 / p.rate + p.restore
    return {"cost": Q(cost, "s", "M = state/rate + restore"),
            "break_even_round": Q(math.floor(cost / p.saving) + 1, "round",
                                  "first N with G(N) = N·Δt − M > 0")}
