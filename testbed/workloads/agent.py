"""``agent`` (C13): N rounds of screenshot upload, server think time and a small action, with
terminal work between rounds (client ``testbed/apps/agent.py`` against the reqresp server).
The steps that stand for computation — preparation once, encoding and terminal work per round on
the device, the model's time on the server — are timed parameters, logged as ``step`` events."""
from __future__ import annotations

from dataclasses import dataclass

from testbed.workloads.base import WORKLOADS, Common, Workload, param


@dataclass(frozen=True)
class AgentParams(Common):
    rounds: int = param(30, "rounds N")
    screenshot: str = param("0.8MB", "upload S per round", unit="size")
    model: str = param("2s", "server think time T per round", unit="time")
    action: str = param("200", "action size A returned", unit="size")
    terminal: str = param("0.3s", "terminal work W between rounds", unit="time")
    encode: str = param("0", "encoding E on the device before each upload (a timed step: the "
                        "screenshot size is what it encodes to)", unit="time")
    prep: str = param("0", "preparation P once before the first round (a timed step)", unit="time")
    disconnect: str = param("none", "none, or K:keep | K:lose — the device loses its connection "
                            "after round K (RST), reconnects after --reconnect and redoes the "
                            "rounds its commit log did not keep: keep = the K−1 confirmed ones "
                            "(round K's commit rides on round K+1), lose = none of the K")
    reconnect: str = param("1s", "time until the network is back after a disconnect (a timed step)",
                           unit="time")
    reuse: bool = param(False, "one connection for all rounds")
    tls: bool = param(False, "TLS 1.3", side="both")

    def validate(self) -> None:
        if self.rounds < 1:
            raise ValueError(f"rounds {self.rounds} must be >= 1")
        after, _ = parse_disconnect(self.disconnect)
        if after > self.rounds:
            raise ValueError(f"disconnect after round {after}: the run has only {self.rounds} rounds")


def parse_disconnect(value: str) -> tuple[int, str]:
    """``none`` → (0, ""); ``K:keep`` / ``K:lose`` → (K, commit) with K >= 1."""
    if value == "none":
        return 0, ""
    k, _, commit = value.partition(":")
    if not k.isdigit() or int(k) < 1 or commit not in ("keep", "lose"):
        raise ValueError(f"disconnect {value!r}: none, or K:keep | K:lose with K >= 1 (e.g. 10:keep)")
    return int(k), commit


AGENT = WORKLOADS.register(Workload("agent", "screenshot agent loop (C13)", "testbed.apps.reqresp",
                                    AgentParams, 5000, client_module="testbed.apps.agent",
                                    client_command=()))
