"""The C9 streaming-audio model, sans-I/O: sender pipeline and two playback players.

All times are plain numbers in one unit of the caller's choice (the apps use ms from the
stream's origin); nothing here reads a clock.

Sender pipeline (CHAPTER12.md C9), chunk i of duration τ:
    c_i = max(a_i, c_{i-1}) + m_i   (processed)      u_i = max(c_i, u_{i-1}) + s_i   (sent)
    r_i = u_i + d_i                 (arrived at the receiver)
with a_i the time the chunk is ready (``a_i = (i+1)·τ`` for live capture).

Playback with initial buffer J, both players starting at p_0 = r_0 + J — a *start delay*.  The
other notion of initial buffer, an *amount* of audio (C9's "60 ms of initial audio"), is
``prebuffer``: playback starts once the first ceil(prebuffer/τ) chunks have all arrived,
p_0 = max(r_0 + J, r_0, …, r_{k−1}) (with J = 0: when k chunks are in).

* ``wait`` — "wait for the missing chunk": p_i = max(r_i, p_{i-1} + τ).  A positive
  r_i − (p_{i−1} + τ) is a stall of that length; it shifts every later chunk.  A chunk that
  never arrives stalls playback for good (``completed`` false; later chunks are not played).
* ``skip`` — "play on schedule, skip late chunks": slot_i = p_0 + i·τ; chunk i plays at its
  slot if r_i ≤ slot_i, otherwise (late or lost) its slot is silence.  A stall is a maximal
  run of consecutive silent slots; its length is τ × the run length.

Reported per player: ``first_play`` (p_0), ``stalls`` (count), ``stall_total`` (sum of stall
lengths), ``first_stall`` (when the first stall began: the slot the missing chunk was due in,
None without one), ``on_time`` (audio duration of chunks played exactly at their nominal slot
p_0 + i·τ), ``played`` (chunks played), ``completed``.
"""
from __future__ import annotations

from dataclasses import dataclass, field


def chunk_bytes(sample_rate: int, sample_bytes: int, tau_s: float, channels: int = 1) -> int:
    """PCM bytes in one chunk: rate × sample size × channels × τ (24 kHz 16-bit 20 ms → 960)."""
    n = sample_rate * sample_bytes * channels * tau_s
    if sample_rate <= 0 or sample_bytes <= 0 or tau_s <= 0 or n != int(round(n)):
        raise ValueError(f"chunk of {tau_s}s at {sample_rate} Hz x {sample_bytes} B is not a whole "
                         "positive number of bytes; pick a chunk duration that is")
    return int(round(n))


def pipeline(ready: list[float], process: list[float], send: list[float],
             delay: list[float]) -> list[float]:
    """Arrival times r_i from ready, processing, sending and one-way delay per chunk."""
    if not len(ready) == len(process) == len(send) == len(delay):
        raise ValueError("ready, process, send and delay need one entry per chunk")
    arrivals, c, u = [], float("-inf"), float("-inf")
    for a, m, s, d in zip(ready, process, send, delay):
        c = max(a, c) + m
        u = max(c, u) + s
        arrivals.append(u + d)
    return arrivals


@dataclass(frozen=True)
class PlaybackResult:
    player: str
    first_play: float | None
    stalls: int
    stall_total: float
    on_time: float
    played: int
    completed: bool
    stuck_at: int | None = None
    play_times: tuple = field(default=(), repr=False)
    first_stall: float | None = None

    def as_dict(self) -> dict:
        return {"player": self.player, "first_play": self.first_play, "stalls": self.stalls,
                "stall_total": self.stall_total, "on_time": self.on_time, "played": self.played,
                "completed": self.completed, "stuck_at": self.stuck_at, "first_stall": self.first_stall}


class Playback:
    """Collects chunk arrivals (in any order, duplicates ignored) and plays them out."""

    def __init__(self, tau: float, initial_buffer: float, chunks: int, prebuffer: float = 0.0):
        if tau <= 0 or initial_buffer < 0 or prebuffer < 0 or chunks < 1:
            raise ValueError("playback needs tau > 0, initial buffer and prebuffer >= 0 and at least one chunk")
        self.tau, self.buffer, self.chunks = tau, initial_buffer, chunks
        self.prebuffer_chunks = min(chunks, -(-round(prebuffer * 1e9) // round(tau * 1e9)))
        self.arrivals: dict[int, float] = {}

    def arrive(self, t: float, seq: int) -> None:
        if 0 <= seq < self.chunks and seq not in self.arrivals:
            self.arrivals[seq] = t

    def _start(self) -> float | None:
        first = [self.arrivals.get(i) for i in range(max(1, self.prebuffer_chunks))]
        if any(r is None for r in first):
            return None
        return max(first[0] + self.buffer, *first)

    def wait(self) -> PlaybackResult:
        p0 = self._start()
        if p0 is None:
            return PlaybackResult("wait", None, 0, 0.0, 0.0, 0, False)
        plays, stalls, stall_total, prev, first = [p0], 0, 0.0, p0, None
        for i in range(1, self.chunks):
            r = self.arrivals.get(i)
            due = prev + self.tau
            if r is None:
                return self._result("wait", p0, stalls + 1, stall_total, plays, False, stuck_at=i,
                                    first_stall=due if first is None else first)
            if r > due:
                stalls += 1
                stall_total += r - due
                first = due if first is None else first
            prev = max(r, due)
            plays.append(prev)
        return self._result("wait", p0, stalls, stall_total, plays, True, first_stall=first)

    def skip(self) -> PlaybackResult:
        p0 = self._start()
        if p0 is None:
            return PlaybackResult("skip", None, 0, 0.0, 0.0, 0, False)
        plays, stalls, silent, in_gap, first = [], 0, 0, False, None
        for i in range(self.chunks):
            slot = p0 + i * self.tau
            r = self.arrivals.get(i)
            if r is not None and r <= slot:
                plays.append(slot)
                in_gap = False
            else:
                plays.append(None)
                silent += 1
                stalls += 0 if in_gap else 1
                in_gap = True
                first = slot if first is None else first
        return self._result("skip", p0, stalls, silent * self.tau, plays, True, first_stall=first)

    def _result(self, player, p0, stalls, stall_total, plays, completed, stuck_at=None,
                first_stall=None) -> PlaybackResult:
        on_time = sum(1 for i, p in enumerate(plays)
                      if p is not None and p <= p0 + i * self.tau + 1e-9) * self.tau
        played = sum(p is not None for p in plays)
        return PlaybackResult(player, p0, stalls, stall_total, on_time, played, completed, stuck_at,
                              tuple(plays), first_stall)
