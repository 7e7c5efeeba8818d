"""The reproduce table as data: one :class:`Row` per quantity of CHAPTER12.md.

Each row holds the chapter's value (as printed), a call into :mod:`analysis.models` (``model``),
how the testbed measures it with packets (``measure``: an experiment, a level, a metric and a
statistic — ``None`` where no experiment exists yet, with ``unmeasured`` saying why), a relative
tolerance, and the explanation hooks used when the measurement misses the chapter.

Measured values come only from experiment runs (``experiments.runner`` + ``experiments.summary``,
real packets on the emulated topologies); a chapter value is never copied into the model or the
measured column.  ``ok`` compares measured with the chapter (|measured − chapter| ≤ tolerance ×
|chapter|); where the model disagrees with the chapter, both are shown and ``note`` says why.

Experiments (``experiments/definitions/*.toml``, among them ``c1-image`` and ``c12-agent``,
which only this table uses) are used by name; the path rows of C5 read ``testbed calibrate``.
``--quick`` runs every experiment with ``QUICK_REPS`` repetitions (``QUICK_REPS_NO_RANDOM`` when
no arm's topology draws at random, named in the row's note), no warm-up, the ``QUICK_SETS`` of
its experiment (fewer requests per run, named in the row's note), and skips measures marked
``full_only``; no path or transfer size is scaled.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from analysis.models import evaluate

QUICK_REPS = 2
#: --quick's repetitions of an experiment none of whose arms meets a random draw on its topology
#: (``Experiment.draws_at_random``: no random loss, jitter or backoff): its runs differ only by
#: the hosts' scheduling (the two quick runs of C1, C8, C10, C12, C14 and C15 agreed within
#: 0.2 %, except where timing tips Linux one way or the other: C12.extra_once's kept connection
#: restarting from 10 or 14 segments, docs/findings.md), and a CI needs
#: ``experiments.stats.MIN_N_CI`` runs, which neither count gives
QUICK_REPS_NO_RANDOM = 1
FULL_REPS = 10
#: repetition blocks an experiment may add for runs its link fidelity verdict excludes because the
#: machine stalled (``run_experiment(replace=)``): with one run per arm a single stall of the host
#: would otherwise leave a row unmeasured
REPLACE_BLOCKS = 2
#: Measure.experiment of the path rows: ``testbed calibrate --json`` (its defaults: the long-haul
#: path), metric = a dotted path into its ``measured`` section
CALIBRATE = "calibrate"

#: Experiments this table needs that are not built-in definitions (the TOML schema as dicts).
#: measured with Linux's segments (MTU 1500: SYN MSS 1460, 1448 B payloads with timestamps)
LINUX_MSS = "measured with Linux's 1448 B MSS (the chapter assumes 1168 B payloads)"
#: the chapter's 1168 B payloads: route advmss 1180 on both hosts (testbed/spec/factors.py ``advmss``;
#: 1180 − 12 B timestamp option), read back as checks.syn_mss and checks.max_payload
MSS1168 = {"host.advmss": "1180"}
CHAPTER_MSS = ("measured with the chapter's 1168 B payloads (host.advmss 1180 on both hosts; Linux "
               "packets are 1220 B IP with the 32 B TCP header + timestamps, the chapter's 1228 B)")
#: ``--quick`` only: RunSpec sets per experiment that shorten it (named in the rows' notes)
QUICK_SETS: dict[str, dict[str, str]] = {
    # no untimed 30 MB warm-up (each takes ~13 s): the timed request starts from the initial
    # window on the open connection, so its slow start is in the time
    "c1-image": {"params.warmup": "0"},
    "c1-blocks": {"params.warmup": "0"},
    # 5 timed requests per run instead of 10 (new connections on the long-haul path, ~1.5 s each)
    "reuse": {"params.requests": "5"},
    "relay": {"params.requests": "5"},
    "initcwnd": {"params.requests": "5"},
    # 3 agent rounds instead of 5 (the row is a per-round median, the first round's setup aside)
    "c12-agent": {"params.rounds": "3"},
    # 10 of the cloud's 20 rounds (~1.6 s each; the rows scale the run to 20; the disconnect
    # after round 10 and its redone rounds as in the full run)
    "c14-cloud": {"params.rounds": "10"},
}

#: Seconds per run of each experiment, (--quick, full), as runs of ``testbed reproduce`` took them
#: (median of finished − started over the experiment's run manifests), for the estimate
#: ``testbed reproduce`` prints when no case is given; MEASURED_ON says where.  An experiment not
#: listed counts DEFAULT_RUN_SECONDS a run.
MEASURED_ON = "on a quiet 2-core VM (AMD EPYC, load 0.4-1.1, CPU busy 21-26 %)"
# --quick: the medians of `testbed reproduce all --quick` (C12-C15 with edgecloud's 1000-packet
# uplinks: `testbed reproduce C12 C13 C14 C15 --quick`); full: the experiments QUICK_SETS shortens,
# one run per level with their full parameters (`testbed experiment run NAME --reps 1 --warmup 0`,
# load 2-6: c1-image and c1-blocks with the warm-up request, c12-agent, initcwnd, relay, reuse; and
# c14-cloud's 20 rounds at its ~1.8 s each), the others as --quick (the same runs).
RUN_SECONDS: dict[str, tuple[float, float]] = {
    "c1-image": (17.5, 50.3), "c1-blocks": (17.3, 50.3), "c12-agent": (15.0, 27.4), "cc": (15.4, 15.4),
    "fec": (7.9, 7.9), "initcwnd": (8.3, 17.1), "multipath": (12.7, 12.7), "relay": (7.0, 16.8),
    "reuse": (9.0, 13.9), "window": (4.9, 4.9), "c14-edge": (14.0, 14.0), "c14-cloud": (22.9, 45.0),
    "c15-migration": (12.5, 12.5), "c8-order": (7.6, 7.6), "c8-delivery": (11.2, 11.2),
    "streams-schedule": (3.2, 3.2), "c9-audio": (1.8, 1.8), "c9-deficit": (2.8, 2.8),
    "c9-longhaul": (5.0, 5.0), "c10-image": (16.7, 16.7), "c11-fail": (6.3, 6.3), "duplicate": (2.5, 2.5),
    # measured on the 2-core Intel machine (`testbed experiment run batch-ack --reps 1 --warmup 0`)
    "batch-ack": (7.1, 7.1)}
#: the chapter's agent runs 30 rounds (C12, C13): an agent run of fewer rounds is scaled to them
#: (``agent_total_30`` in experiments/reproduce/run.py: setup + 30 × its mean whole round)
AGENT_ROUNDS = 30
#: C14 places the remaining 20 rounds (``agent_total_20``, as AGENT_ROUNDS)
PLACEMENT_ROUNDS = 20
_PLACE = ("measured: the agent's 20 rounds on edgecloud's {host} (c14-{host}: 0.8 MB screenshot, "
          "0.3 s terminal work, the place's preparation once and model time per round as timed "
          "steps, one kept connection, slow start after idle off), the whole run scaled to 20 "
          "rounds: setup (preparation, the connection's opening) + the first whole round + 19 × "
          "the mean of the others{quick}")
_AGENT_SCALED = ("measured: the agent's whole run on edgecloud's cloud path (0.8 MB screenshot up "
                 "at 6.4 Mbit/s, 0.3 s terminal work and the 2 s model as timed steps, 200 ms RTT, "
                 "TLS), scaled to 30 rounds: setup (preparation, a kept connection's opening) + the "
                 "first whole round (encoding, request, terminal work) + 29 × the mean of the others, "
                 "of a run of 5 rounds (--quick: 3); a 30-round run gives its total_s itself")
#: the cause of a miss of the kept connection's uploads at 6.4 Mbit/s (C13, C14's cloud)
_UPLOADS = ("the uploads' headers (3.6 % more time at 6.4 Mbit/s) and the first round's slow start "
            "({rounds}); with a one-BDP uplink buffer instead of edgecloud's 1000 packets, the kept "
            "window's burst loses segments every round (retransmissions below; docs/findings.md)")
_AGENT_EXPLAIN = (("round_s", "s per whole round"), ("setup_s", "s before the first round"),
                  ("handshake_ms", "handshake ms"), ("retransmissions", "retransmitted segments"))
#: the chapter's kept connection sends each upload at the path's rate: slow start after idle off
#: (Linux restarts a connection idle for an RTO from its initial window: +0.57 s per 0.8 MB round
#: on the cloud path — the default-setting runs of C12.extra_once show it)
KEPT = {"host.slow_start_after_idle": "false"}
_KEPT_NOTE = "; measured with host.slow_start_after_idle false (the chapter's kept connection)"
#: C13's compressed screenshot: 0.2 MB with 30 ms of encoding per round (timed steps)
COMPRESSED = {"params.screenshot": "0.2MB", "params.encode": "30ms", **KEPT}
DEFAULT_RUN_SECONDS = 10.1  # the median of the --quick runs above
# `testbed calibrate` in the same --quick run (18 s) + its overflow train in a topology of its own
# (+4.5-6 s: 13.9 s with --overflow none, 18.4-20.0 s with it, load ~1)
CALIBRATE_SECONDS = 24.0
#: the table's report per case measured: its figures in PNG, SVG and PDF (78 s for the 15 cases of
#: `testbed reproduce all --quick`, redrawn from its finished experiments, quiet machine)
REPORT_SECONDS = 5.2


@dataclass(frozen=True)
class ModelRef:
    """A value of the model column: ``evaluate(name, **params)[output] × scale``."""
    name: str
    output: str
    params: Mapping[str, Any] = field(default_factory=dict)
    scale: float = 1.0
    index: int | None = None      # for a list output: which element

    def value(self) -> float:
        v = evaluate(self.name, **dict(self.params))[self.output].value
        return float((v if self.index is None else v[self.index]) * self.scale)

    def describe(self) -> str:
        args = " ".join(f"--{k.replace('_', '-')} {v}" for k, v in self.params.items())
        return f"testbed model {self.name} {args}".rstrip() + f" → {self.output}"


@dataclass(frozen=True)
class Measure:
    """How packets measure a row: experiment (by name), RunSpec ``sets``
    (applied with ``--set``), the level, the metric (``RunResult.metrics`` name, or a read-back
    of ``RunResult.checks`` with ``source="checks"``) and the statistic: ``median`` of one level (CI: bootstrap
    95 % of the median), ``ratio``/``difference`` of the medians of ``levels`` (a, b) = a/b,
    a − b (bootstrap CI), or ``pooled_mean``/``pooled_median``/``pooled_p99``/``pooled_max`` of every value of a
    list metric over the level's valid runs (one per request), ``pooled_ratio`` the quotient of
    two levels' pooled medians; ``runs``: pool only the level's first ``runs`` valid runs in run
    order (a sample size the chapter states, e.g. the worst of its 8 receptions; None: every
    valid run).  ``scale`` converts the metric's unit to the row's.  ``per``: another
    measure (of any experiment) Δ; the row is then the first round N with N·Δ > this measure's
    value M, floor(M/Δ) + 1 (a break-even round from two measured quantities; CI from the ends of
    the two CIs)."""
    experiment: str
    metric: str
    level: str | None = None
    statistic: str = "median"
    levels: tuple = ()
    sets: Mapping[str, str] = field(default_factory=dict)
    scale: float = 1.0
    source: str = "metrics"
    full_only: bool = False
    per: "Measure | None" = None
    runs: int | None = None

    @property
    def key(self) -> tuple:
        return (self.experiment, tuple(sorted(self.sets.items())))


@dataclass(frozen=True)
class Row:
    id: str
    quantity: str
    unit: str
    chapter: float
    model: ModelRef | None
    measure: Measure | None = None
    tolerance: float = 0.10
    unmeasured: str = ""     # why measure is None: "not yet measured: ..." or "model-only: ..."
    note: str = ""           # the model's assumption, or why model and chapter differ
    cause: str = ""          # the expected cause of a miss, named in the note with evidence
    cause_low: str = ""      # ... of a miss below the chapter's value, where it differs
    explain: tuple = ()      # (metric, label): numbers of the same runs quoted as evidence

    @property
    def case(self) -> str:
        return self.id.split(".")[0]


def M(name, output, scale=1.0, **params) -> ModelRef:
    return ModelRef(name, output, params, scale)


_IMG = "c1-image"
_BLOCKS = "c1-blocks"
#: C1's codec: lossless 2x compression of the upload, 0.15 s of encoding (a timed step)
CODEC = {"params.compress": "0.5", "params.encode": "150ms"}
_BLOCKS_EXPLAIN = (("first_byte_ms", "ms to the first reply byte"), ("retransmissions", "retransmitted segments"),
                   ("max_in_flight_bytes", "max bytes in flight"))
_IMG_EXPLAIN = (("retransmissions", "retransmitted segments"), ("data_per_ack", "data segments per ACK"),
                ("max_in_flight_bytes", "max bytes in flight"))
_NO_WORKLOAD = "not yet measured: "
_REQ_MEDIAN = "pooled_median"
#: the kept-alive request on the long-haul path, the median of every request: C6's serial budget
#: and C7's direct, kept alive are this one measurement
_KEPT_ALIVE = Measure("reuse", "completion_ms", "reuse", statistic=_REQ_MEDIAN)


def c8_sets(rate: float = 8e6, payload: int = 1448, frame: int = 1514, frames: int = 16) -> dict[str, str]:
    """C8's scenario from ``testbed model streams``' inputs: on a ``rate`` link whose full frames
    (``frame`` B on the wire) carry ``payload`` B, the image is image_time × the payload rate, the
    audio message audio_time × it in ``frames`` frames, ready from audio_ready (1 µs apart)."""
    from analysis.models.streams import StreamsParams
    p, goodput = StreamsParams(), rate * payload / frame / 8
    return {"topology_params.rate_up": f"{rate / 1e6:g}mbit", "topology_params.rate_down": f"{rate / 1e6:g}mbit",
            "params.image": str(round(p.image_time * goodput)),
            "params.chunk_bytes": str(round(p.audio_time * goodput / frames)), "params.chunks": str(frames),
            "params.audio_start": f"{p.audio_ready:g}s"}


#: C8 sending order (experiment c8-order) and delivery order (c8-delivery, one image packet lost
#: on the link by a per-frame event of its schedule)
C8_ORDER = c8_sets()
C8_DELIVERY = {**C8_ORDER, "links.bottleneck.down.schedule":
               str(Path(__file__).resolve().parents[1] / "schedules" / "c8-image-loss.toml")}
_C8_HOW = ("scenario from testbed model streams: image_time 5 s, audio_time 1 s and audio_ready 2 s "
           "at 8 Mbit/s with 1448 B payloads in 1514 B frames (c8_sets: a 4,782,034 B image, 16 "
           "audio frames of 59,775 B ready from 2 s) on longhaul at 10 ms one way, no loss; "
           "measured: the last frame delivered to the receiving application, from the session start "
           "(the model's 'sent' plus the one-way delay and the bottleneck queue)")
_C8_EXPLAIN = (("image_done_ms", "image delivered ms"), ("audio_done_ms", "audio delivered ms"),
               ("audio_order_wait_max_ms", "max ms an audio chunk waited for other streams' bytes"))
_SCHEDULES = Path(__file__).resolve().parents[1] / "schedules"
#: the audio app's UDP frame around the PCM: its 16 B chunk header, 8 B UDP, 20 B IP, 14 B Ethernet
AUDIO_FRAME_OVERHEAD = 16 + 8 + 20 + 14


def c9_sets() -> dict[str, str]:
    """C9's pipeline from ``testbed model audio``'s inputs: the link sends one chunk's UDP frame in
    ``send`` (rate = frame bits / send) and delays it ``one_way``; chunk ``late_chunk`` gets
    late_delay − one_way more from a per-frame event (experiments/schedules/c9-late-chunk.toml,
    whose numbers a test checks against the same inputs)."""
    from analysis.models.audio import AudioParams
    from testbed.protocols.playback import chunk_bytes
    p = AudioParams()
    frame = chunk_bytes(p.sample_rate, p.sample_bytes, p.tau) + AUDIO_FRAME_OVERHEAD
    rate = f"{frame * 8 / p.send / 1e6:g}mbit"
    return {"topology_params.rate_up": rate, "topology_params.rate_down": rate,
            "topology_params.delay": f"{p.one_way * 1e3:g}ms", "params.process": f"{p.process * 1e3:g}ms",
            "params.duration": f"{p.chunks * p.tau * 1e3:g}ms",
            "links.bottleneck.down.schedule": str(_SCHEDULES / "c9-late-chunk.toml")}


def c9_deficit_sets() -> dict[str, str]:
    """C9's deficit from ``testbed model audio-deficit``'s inputs: 20 ms chunks of its PCM on a
    link whose rate delivers the PCM at ``receive_rate`` (frames of PCM + the UDP overhead)."""
    from analysis.models.audio import DeficitParams
    p = DeficitParams()
    pcm = round(p.sample_rate * p.sample_bits * p.channels * 0.02 / 8)
    rate = f"{p.receive_rate * (pcm + AUDIO_FRAME_OVERHEAD) / pcm / 1e3:.3f}kbit"
    return {"topology_params.rate_up": rate, "topology_params.rate_down": rate,
            "params.rate": str(p.sample_rate), "params.sample_bytes": str(p.sample_bits // 8)}


C9_PIPELINE = c9_sets()
C9_DEFICIT = c9_deficit_sets()
_C9_HOW = ("measured: experiment c9-audio — the audio workload over UDP, 10 chunks of 960 B "
           "(24 kHz 16-bit, 20 ms), 12 ms processing per chunk (the server's timed step), a link "
           "that sends a chunk's 1018 B frame in 1 ms (8.144 Mbit/s) and delays it 5 ms, chunk 2 "
           "50 ms (a per-frame delay event, experiments/schedules/c9-late-chunk.toml); times from "
           "the stream's origin (the server read the request), arrival = the client application "
           "received the chunk; the J of the levels is a start delay after chunk 0 arrives")
_C9_CAUSE = ("the server's 12 ms sleep and the sending wake late on a loaded machine, and the "
             "receive adds the client's scheduling (arrivals below)")
_C9_EXPLAIN = (("audio_late_arrival_ms", "late chunk arrives ms"), ("audio_first_play_ms", "first play ms"),
               ("audio_min_start_ms", "smallest J without a stall, ms"))

def c11_common_failures(q: float = 0.02, attempts: int = 400, seed: int = 11) -> list[int]:
    """Attempts (1-based chunk frames) at which C11's common endpoint fails: each of ``attempts``
    with probability ``q``, drawn from ``random.Random(seed)``.  The events of
    experiments/schedules/c11-common-failure.toml (a test checks the file against this)."""
    import random
    rng = random.Random(seed)
    return [k + 1 for k in range(attempts) if rng.random() < q]


def attempts_needed(p: float, other: float, z: float = 1.96) -> int:
    """Attempts after which a measured failure fraction p has a normal-approximation 95 % CI
    (± z·sqrt(p(1 − p)/n)) that excludes ``other``."""
    return math.ceil(z * z * p * (1 - p) / (p - other) ** 2)


_C11_FAIL = str(_SCHEDULES / "c11-common-failure.toml")
#: C11 failures (experiment c11-fail): the common endpoint's seeded failures drop the attempt's
#: copy on both access paths; p1, p2 are the access paths' own seeded loss (loss1, loss2)
C11_FAIL = {"links.access1.up.schedule": _C11_FAIL, "links.access2.up.schedule": _C11_FAIL}
#: C11 bytes (experiment duplicate): the chapter's 8 chunks of 640 B, no loss
C11_BYTES = {"topology_params.loss1": "0%", "topology_params.loss2": "0%", "params.chunks": "8",
             "params.chunk_bytes": "640"}

#: C8 deadlines (experiment streams-schedule): 8 chunks of 640 B (16 kHz PCM) at 50 ms one way
C8_DEADLINE = {"topology_params.delay": "50ms", "params.chunk_bytes": "640"}
_C8_DEADLINE_NOTE = ("measured: streams-schedule (8 chunks of 20 ms, 640 B, due at the receiving "
                     "application from 0.4 s + i·20 ms, one TCP connection with a 2 MB image queued "
                     "at 0, 20 Mbit/s, 50 ms one way), chunks on time × 20 ms; model with the same "
                     "2 MB image (0.8 s of sending ends after the last deadline, 0.54 s, as the "
                     "chapter's 30 MB does)")
#: the relay as the chapter's model assumes it: the SOCKS5 reply does not wait for the far connect
OPTIMISTIC = {"params.connect_mode": "optimistic"}
#: C11 as the chapter: 30 MB, the dualpath's two access paths without the shared egress bottleneck
SPLIT30 = {"params.size": "30MB", "links.egress.up.rate": "unshaped"}

_DISCONNECT = ("measured as C14.cloud (c14-cloud) with params.disconnect: after round 10 the device "
               "drops its connection (RST), a 1 s timed reconnect step stands for the network's "
               "return, the kept connection is opened again (TCP, 1 RTT) and the rounds the commit "
               "log lost are done again; scaled to 20 rounds as C14.cloud plus the disconnect and "
               "the redone rounds as measured (--quick: 10 rounds, the disconnect after the last).  "
               "Not a link outage: a [dynamics] outage's moment is a time, a frame or a byte count "
               "of one direction, and none of them falls reliably between round 10's action and "
               "round 11's upload; ")
_DISCONNECT_CAUSE = ("the cloud rounds themselves (C14.cloud's cause) and the reconnection's opening "
                     "after the 1 s step (disconnect_s below)")
_DISCONNECT_EXPLAIN = (("disconnect_s", "s from the drop to the reopened connection"),
                       ("redo_s", "s per redone round"), ("round_s", "s per whole round"))
_MIGRATE = "c15-migration"
_MIGRATE_NOTE = ("measured: the c15-migration experiment — 64 MiB sent to edgecloud's edge (80 Mbit/s, "
                 "20 ms RTT) on a new connection, then the restore as a timed step on the server "
                 "(its processing time), from request_issued to the 100 B reply")
_MIGRATE_CAUSE = ("the new connection's handshake and slow start, whose overshoot overflows the edge "
                  "link's one-BDP buffer (retransmissions below), and the headers (1500 B frames "
                  "carry 1448 B: 3.6 % more than the 6.71 s the model charges for 64 MiB at 80 Mbit/s)")
_MIGRATE_EXPLAIN = (("handshake_ms", "handshake ms"), ("retransmissions", "retransmitted segments"),
                    ("max_in_flight_bytes", "max bytes in flight"))
#: C15's saving per round Δt = 0.4 s: the 2 RTTs a kept session saves each round — measured as
#: C12.extra_once (the agent's per-round completion, reconnecting minus reusing)
_SAVING = Measure("c12-agent", "completion_ms_median", statistic="difference", levels=("false", "true"),
                  scale=1e-3)
_BREAK_EVEN_NOTE = ("measured: floor(M/Δt) + 1 from two measured quantities — Δt the per-round saving "
                    "of a kept session (C12.extra_once: the agent's per-round completion, new TLS "
                    "connection minus reuse; the chapter's 0.4 s) and M the migration cost of ")

ROWS: tuple[Row, ...] = (
    # ---- C1
    Row("C1.serial_total", "serial completion Su/Bu+R+Tc+Sd/Bd", "s", 12.8, M("serial", "total"),
        Measure(_IMG, "completion_ms_median", "quick", scale=1e-3), 0.05,
        note="a lower bound: no headers, ACKs, handshake or slow start; " + LINUX_MSS,
        cause="headers, ACKs and window growth the serial model leaves out; the chapter's own "
              "packet-level time of this request, C1.full_response_linux, is above this tolerance",
        explain=_IMG_EXPLAIN),
    Row("C1.process_10x", "serial completion, 10x faster processing", "s", 12.53,
        M("serial", "total", process=0.03),
        Measure(_IMG, "completion_ms_median", "quick", sets={"params.process": "30ms"},
                scale=1e-3, full_only=True), 0.05,
        cause="as C1.serial_total", explain=_IMG_EXPLAIN),
    Row("C1.uplink_100", "serial completion, uplink 100 Mbit/s", "s", 3.2,
        M("serial", "total", uplink=100e6),
        Measure(_IMG, "completion_ms_median", "quick",
                sets={"topology_params.rate_up": "100mbit"}, scale=1e-3, full_only=True),
        0.10, cause="slow start and window growth weigh more on a 3 s transfer", explain=_IMG_EXPLAIN),
    Row("C1.compressed", "serial completion, 2x lossless compression, 0.15 s codec", "s", 7.0,
        M("serial", "total", compression=0.5),
        Measure(_IMG, "completion_ms_median", "quick", sets=CODEC, scale=1e-3), 0.10,
        note="model: compression of the upload only, codec 0.15 s once (6 + 0.15 + 0.1 + 0.3 + 0.4); "
             "measured: the C1 request with a codec step (params.compress 0.5: 15 MB on the wire, "
             "params.encode 150ms: a timed step on the client inside the request's time); " + LINUX_MSS,
        cause="as C1.serial_total: headers, ACKs and window growth on the 15 MB upload",
        explain=_IMG_EXPLAIN),
    Row("C1.break_even", "compression break-even uplink", "Mbit/s", 800,
        M("serial", "break_even_uplink", compression=0.5), None,
        unmeasured="model-only: a rate where two model terms are equal, not an event on the wire"),
    Row("C1.blocks", "completion, three independent blocks", "s", 12.36, M("blocks", "total"),
        Measure(_BLOCKS, "completion_ms_median", "false", scale=1e-3), 0.05,
        note="measured: the c1-blocks experiment — three 10 MB block requests written back to back "
             "on the warm connection, each processed 0.1 s as it arrives and answered (1, 2, 2 MB) "
             "while the next uploads (params.blocks 3); " + LINUX_MSS,
        cause="as C1.serial_total: headers, ACKs and window growth of the upload (the last "
              "block's processing and reply are the only ones not hidden)",
        explain=_BLOCKS_EXPLAIN),
    Row("C1.blocks_dependent", "completion, three blocks with a global dependency", "s", 12.8,
        M("blocks", "total", dependent=True),
        Measure(_BLOCKS, "completion_ms_median", "true", scale=1e-3), 0.05,
        note="measured: as C1.blocks with params.dependent: nothing processed before the last block "
             "arrived, then 0.3 s and the 5 MB of replies; " + LINUX_MSS,
        cause="as C1.serial_total", explain=_BLOCKS_EXPLAIN),
    Row("C1.packets_up", "data packets up (1168 B payload)", "packets", 25685, M("packets", "packets_up"),
        Measure(_IMG, "data_packets_c2s", "quick", sets=MSS1168), 0.02,
        note="measured: TCP segments with payload client→server in the timed request's window "
             "(retransmissions included); " + CHAPTER_MSS + "; Linux's 1448 B MSS sends 20,718 "
             "segments up (testbed model packets --payload 1448)",
        cause="retransmitted segments are counted too", explain=_IMG_EXPLAIN),
    Row("C1.packets_down", "data packets down (1168 B payload)", "packets", 4281,
        M("packets", "packets_down"), Measure(_IMG, "data_packets_s2c", "quick", sets=MSS1168), 0.02,
        note="measured as C1.packets_up, server→client", cause="retransmitted segments are counted too",
        explain=_IMG_EXPLAIN),
    Row("C1.wire_bytes", "bytes on the wire, one ACK per packet", "B", 39554832,
        M("packets", "wire_bytes"), Measure(_IMG, "wire_bytes", "quick", sets=MSS1168), 0.05,
        note="measured: Σ IP length of every TCP packet both ways in the timed window; " + CHAPTER_MSS,
        cause="Linux's headers and ACKs: 1220 B data packets (8 B fewer than the chapter's) and "
              "52 B ACKs (40 B fewer), and quickack still ACKs more than one segment at a time "
              "(testbed model packets --header 52 --ack 52 gives the Linux-sized count)",
        explain=(("data_per_ack", "data segments per ACK"), ("packets_c2s", "packets up"),
                 ("packets_s2c", "packets down"))),
    Row("C1.full_response", "full response, packet level, 1168 B payloads", "s",
        14.36, M("packets", "full_response"),
        Measure(_IMG, "completion_ms_median", "quick", sets=MSS1168, scale=1e-3), 0.10,
        cause="Linux's window growth and losses in the bottleneck buffer (retransmissions below); "
              "C1.full_response_linux is the same request with Linux's default MSS",
        explain=_IMG_EXPLAIN,
        note=CHAPTER_MSS + "; model reproduces 14.36 s only with each transfer's ACKs serialized on its data's "
             "channel and the download without overhead (analysis/models/transfer.py); full "
             "duplex gives 13.44 s"),
    Row("C1.full_response_linux", "full response, Linux default MTU 1500 (1448 B MSS)", "s", 14.36,
        M("packets", "full_response", payload=1448, header=52, ack=52),
        Measure(_IMG, "completion_ms_median", "quick", scale=1e-3), 0.10,
        note="the chapter's number is for 1228 B packets; model with 1448 B payload, 52 B headers "
             "and ACKs, ACKs on the data's channel as in C1.full_response",
        cause="fewer, larger packets than the chapter's (1448 B vs 1168 B payload)",
        explain=_IMG_EXPLAIN),
    # ---- C2
    Row("C2.ack_immediate_bytes", "bytes on the wire, immediate ACK", "B", 39555120,
        M("packets", "wire_bytes"), Measure(_IMG, "wire_bytes", "quick", sets=MSS1168), 0.05,
        note="model 288 B fewer: the chapter's simulator also counts connection control packets; "
             "measured as C1.wire_bytes (route quickack)",
        cause="as C1.wire_bytes", explain=(("data_per_ack", "data segments per ACK"),)),
    Row("C2.ack_delayed_bytes", "bytes on the wire, ACK every 2 packets or 10 ms", "B", 38177328,
        M("packets", "wire_bytes", ack_every=2), Measure(_IMG, "wire_bytes", "max-10ms", sets=MSS1168),
        0.05, note="model 840 B fewer: 288 B of control packets and 6 timer-driven ACKs; measured "
                   "with TCP_DELACK_MAX_US 10 ms, " + CHAPTER_MSS,
        cause="as C1.wire_bytes", explain=(("data_per_ack", "data segments per ACK"),)),
    Row("C2.ack_immediate_time", "full response, immediate ACK (NewReno)", "s", 14.521,
        M("packets", "full_response"),
        Measure(_IMG, "completion_ms_median", "quick", sets=MSS1168, scale=1e-3), 0.05,
        note="chapter: its own NewReno simulation; model: the packet-level lower bound (no window); "
             + CHAPTER_MSS,
        cause="Linux ACKs: quickack still sends >1 data segment per ACK; CUBIC, not NewReno",
        explain=_IMG_EXPLAIN),
    Row("C2.ack_delayed_time", "full response, ACK every 2 packets or 10 ms", "s", 14.564,
        M("packets", "full_response", ack_every=2),
        Measure(_IMG, "completion_ms_median", "max-10ms", sets=MSS1168, scale=1e-3), 0.05,
        note="the model's lower bound gets shorter with fewer ACKs (they free the link); the "
             "chapter's window stall (+43 ms) is not in a model without a window; " + CHAPTER_MSS,
        cause="stretch ACKs and the 12 ms delayed-ACK tick (TCP_DELACK_MAX_US at HZ=250)",
        explain=_IMG_EXPLAIN),
    Row("C2.data_per_ack_quick", "data packets per ACK, immediate ACK", "packets", 1,
        None, Measure(_IMG, "data_per_ack", "quick", sets=MSS1168), 0.10,
        note="no model: the chapter's policy (one ACK per data packet) is the value; measured on "
             "the C1 image transfer, " + CHAPTER_MSS,
        cause="Linux never ACKs strictly every packet (docs/findings.md: 1.00-1.20)"),
    Row("C2.data_per_ack_delayed", "data packets per ACK, every 2 packets or 10 ms", "packets", 2,
        None, Measure(_IMG, "data_per_ack", "max-10ms", sets=MSS1168), 0.10,
        note="no model: the chapter's policy is the value; measured as C2.data_per_ack_quick",
        cause="Linux ACKs at most every 2 full segments and sooner on PSH, window updates and "
              "quickack mode after idle"),
    # ---- C3
    Row("C3.bdp", "bytes in flight to fill 20 Mbit/s x 100 ms", "B", 250e3, M("window", "bdp"),
        Measure("window", "bdp_bytes", "default"), 0.20,
        note="measured: an autotuned 3 MB upload's largest delivery rate over one smallest RTT "
             "(before its first retransmission) x that RTT, both from the sender's capture — the "
             "payload in flight that keeps the bottleneck busy without a queue (BBR's BtlBw x "
             "RTprop; bdp_bytes, docs/reference/metrics.md); its largest in flight is larger: a "
             "loss-based sender also fills the bottleneck buffer (one BDP by default)",
        cause="a sender that never filled the bottleneck (window- or application-limited) reads "
              "its own rate, a lower side of the BDP; the rate counts payload, without the headers",
        explain=(("max_in_flight_bytes", "max bytes in flight"), ("goodput_mbps", "goodput Mbit/s"),
                 ("retransmissions", "retransmitted segments"))),
    Row("C3.window_cap", "throughput cap W/R, 64 KB window", "Mbit/s", 5.12,
        M("window", "window_bound"), Measure("window", "goodput_mbps", "64KB"), 0.15,
        note="a bound; with one batch ACK per window the cycle model gives 4.08 Mbit/s",
        cause="the kernel's window clamp (64,000 → ~78,000 B after the first segment, docs/findings.md) "
              "and ACK clocking within the window",
        explain=(("max_in_flight_bytes", "max bytes in flight"),)),
    Row("C3.batch_cycle", "batch-ACK cycle with a 64 KB window", "ms", 125.6, M("window", "batch_cycle"),
        Measure("batch-ack", "flight_period_ms", "n-44"), 0.10,
        note="measured: the testbed's UDP transport behind a fixed 64 KB window (44 symbols) with "
             "one ACK per window (ack_policy n:44), a 3 MB upload; the median start-to-start "
             "interval of its flights (analysis.fec: symbols separated by idle gaps > half the "
             "smallest RTT), median over runs.  Linux's receiver cannot batch its ACKs: it ACKs "
             "every ~2 segments, and ACK clocking sends the next flight one RTT after the last, as "
             "the experiment's other arm (an ACK per symbol) shows",
        cause="the window's frames carry headers (W/R counts 64,000 B; 44 frames of 1509 B take "
              "longer) and a lost or late ACK stretches a cycle",
        explain=(("retransmissions", "symbols sent again"), ("flights", "flights per run"))),
    # ---- C4
    Row("C4.first_round", "first round (initial window)", "segments", 10, None,
        Measure("initcwnd", "first_flight_segments", "10", statistic="pooled_median",
                source="checks"), 0.0,
        note="no model: the initial window is the chapter's setting (10 x 1460 B)",
        cause="the first flight is limited by the request size or the peer's receive window"),
    Row("C4.rounds", "slow-start rounds for 354,640 B", "rounds", 5, M("slowstart", "rounds"),
        Measure("initcwnd", "flights", "10", statistic="pooled_median"), 0.0,
        note="measured: flights of the first connection's request upload (analysis.tcp), median "
             "over runs; with Linux's 1448 B MSS also 5 rounds (448,880 B after round 5)",
        cause="the server's advertised receive window (autotuned from ~64 KB) or a loss splits a "
              "round into more flights",
        explain=(("rwnd_limited_ms", "ms rwnd-limited per connection (TCP_INFO)"),
                 ("retransmissions", "retransmitted segments per run"))),
    Row("C4.cumulative_5", "cumulative bytes after 5 rounds", "B", 452600,
        ModelRef("slowstart", "cumulative", index=4),
        Measure(_IMG, "cumulative_5", "quick", statistic="pooled_median"), 0.05,
        note="measured: the request's bytes in the first 5 flights (one round trip each; "
             "analysis/tcp.py flights of the client's capture) of C1's 30 MB request on a just "
             "opened connection (the runs of C1.serial_total, --quick: no warm-up), median; the "
             "354,640 B request ends inside round 5, and on the long-haul path's new connections "
             "(initcwnd) the server's initial receive window caps round 4 (~81 KB instead of "
             "115,840 B: C4.rounds' cause); " + LINUX_MSS + ": 10·1448·31 = 448,880 B",
        cause="the server's advertised receive window or a loss caps a round below the doubled "
              "window, or splits it into two flights",
        explain=(("flight_bytes", "bytes per flight"), ("rwnd_limited_ms", "ms rwnd-limited per connection"),
                 ("retransmissions", "retransmitted segments per run"))),
    # ---- C5
    Row("C5.rtt_min", "long-haul RTT, minimum (Queqiao records)", "ms", 199, None,
        Measure(CALIBRATE, "rtt_ms.min"), 0.02,
        note="no model: the path's 200 ms is a configured input (longhaul topology); measured by "
             "testbed calibrate's UDP echo probes",
        cause="the emulated path has no jitter: its RTT is the configured 200 ms plus serialization"),
    Row("C5.rtt_max", "long-haul RTT, maximum", "ms", 207, None, Measure(CALIBRATE, "rtt_ms.max"), 0.02,
        note="no model: measured by testbed calibrate's 200 UDP echo probes",
        cause="the emulated path has no jitter (longhaul jitter 0ms): its RTT varies only by "
              "serialization and the host's scheduling, while the chapter's 207 ms is a real "
              "path's worst record"),
    Row("C5.loss_down", "loss Irvine→Guiyang", "1", 0.14, None, Measure(CALIBRATE, "loss.down"), 0.10,
        note="no model: an input of the path (longhaul: 14% down); n = probes sent"),
    Row("C5.lost_up", "loss Guiyang→Irvine (0 of 41,663)", "1", 0, None, Measure(CALIBRATE, "loss.up"), 0.0,
        note="no model: an input of the path (longhaul: none up); n = probes sent"),
    Row("C5.overflow_loss", "loss at 600 Mbit/s through the 333 Mbit/s knee", "1", 0.44,
        M("longhaul", "overflow_loss"), Measure(CALIBRATE, "overflow.loss"), 0.10,
        note="model: queue overflow alone, 1 − 333/600 = 0.445; measured: testbed calibrate's "
             "overflow train, 2 s of 1514 B frames offered at 600 Mbit/s client→server (no random "
             "loss) into the 333 Mbit/s one-BDP queue, in a topology of its own; loss = datagrams "
             "not received among those sent from the first lost one on (the queue full), less "
             "those the receiver's kernel dropped; n = those datagrams; a train the link did not "
             "deliver at its rate (±2 %), or whose run's link fidelity is not ok, is not used",
        cause="the sender did not offer 600 Mbit/s (the loss is 1 − 333/offered), or something "
              "other than the queue dropped frames",
        explain=(("overflow.offered_mbps", "Mbit/s offered over the window"),
                 ("overflow.delivered_mbps", "Mbit/s delivered"),
                 ("overflow.expected", "1 − 333/offered"),
                 ("overflow.drops.queue", "queue drops"),
                 ("overflow.drops.random_loss", "random-loss drops"),
                 ("overflow.drops.emulator_unintended", "the emulator's own drops"),
                 ("overflow.drops.receive_path", "receive-path drops"),
                 ("overflow.fidelity.lag_p99_ms", "ms p99 read lag"),
                 ("overflow.fidelity.late_p99_ms", "ms p99 lateness"))),
    Row("C5.mathis", "Mathis bound at p = 0.14 (C = 1)", "Mbit/s", 0.155, M("longhaul", "mathis"),
        Measure("cc", "goodput_mbps", "reno"), 0.5,
        note="measured: NewReno's goodput down the lossy direction (10 s bulk); Mathis is an "
             "approximation, hence the wide tolerance",
        cause="retransmission timeouts dominate at 14% loss (Mathis assumes fast recovery)",
        explain=(("retransmissions", "retransmitted segments"),)),
    Row("C5.mathis_c122", "Mathis bound, C = 1.22", "Mbit/s", 0.189, M("longhaul", "mathis", mathis_c=1.22),
        unmeasured="model-only: the same bound with another constant; C5.mathis is measured"),
    Row("C5.mathis_time", "354,640 B at the Mathis rate", "s", 18.3, M("longhaul", "mathis_transfer"),
        unmeasured="model-only: a time at the model's rate; C5.mathis measures the rate"),
    Row("C5.bdp", "BDP 333 Mbit/s x 0.2 s", "MB", 8.325, M("longhaul", "bdp"),
        unmeasured="model-only: the product of the path's rate and RTT (both inputs)"),
    Row("C5.bbr_cap", "BBR in-flight cap, cwnd_gain 2", "MB", 16.65, M("longhaul", "bbr_inflight_cap"),
        Measure("cc", "max_pipe_bytes", "bbr", scale=1e-6), 0.25,
        note="measured: the largest pipe of BBR's 10 s bulk down the lossy direction (the bytes "
             "still in the network, RFC 6675: what its cwnd bounds; the outstanding bytes, max bytes "
             "in flight below, also count SACKed bytes waiting behind the 14 % losses' holes)",
        cause="BBR's cap is cwnd_gain x the bandwidth it measured x RTprop plus its quantization and "
              "the extra it allows for ACK aggregation (max bytes in flight below: SACKed bytes behind "
              "holes on top)",
        cause_low="BBR's cap is cwnd_gain x the bandwidth it measured x RTprop, and it measured far "
                  "less than 333 Mbit/s (its goodput below)",
        explain=(("goodput_mbps", "goodput Mbit/s"), ("max_in_flight_bytes", "max bytes in flight"))),
    Row("C5.bbr_goodput", "BBR ideal goodput (1 − p)·333", "Mbit/s", 286, M("longhaul", "bbr_goodput"),
        Measure("cc", "goodput_mbps", "bbr"), 0.15,
        cause="Linux BBR leaves Startup early under 14% random loss: Recovery's packet "
              "conservation and the receiver's autotuned window (~80 KB at first, rwnd-limited up "
              "to 1.2 s) stall its delivery-rate samples, and PROBE_BW then climbs by at most "
              "1.075x per 8 rounds, so a 10 s run measures the start of the climb (docs/findings.md, BBR on "
              "the long-haul path: 0.86-52.6 Mbit/s in 30 s, 275 Mbit/s Startup with --window 32MB)",
        explain=(("retransmissions", "retransmitted segments"), ("max_in_flight_bytes", "max bytes in flight"))),
    # ---- C6
    Row("C6.packets", "packets of 1448 B", "packets", 245, M("fec", "packets"), None,
        unmeasured="model-only: ceil(354,640/1448), a count fixed by the input"),
    Row("C6.expected_lost", "expected packets lost", "packets", 34.3, M("fec", "expected_lost"),
        Measure("fec", "first_round_lost", "off", statistic="pooled_mean"), 0.15,
        note="measured: per request of the ARQ arm, the source symbols the client sent again in "
             "round 1 (its capture, analysis/fec.py) — the first transmission's losses on the 14% "
             "direction as the sender found them; mean over every request",
        cause="a binomial count of few requests (sd √(245·p·(1−p)) = 5.4 per request) and the "
              "emulator's loss draw; a tail probe before the first ACK counts as one more",
        explain=(("first_round_lost", "symbols lost in round 0 per request"),)),
    Row("C6.serial_budget", "serial budget RTT + model + sending", "ms", 238.5, M("fec", "serial_budget"),
        _KEPT_ALIVE, 0.10,
        note="measured: the median of every kept-alive request on the long-haul path, a per-request "
             "budget (C7.direct_keepalive's measurement)",
        cause="the request burst overflows the bottleneck buffer after idle (docs/findings.md: the emulator "
              "drops ~80 frames)", explain=(("retransmissions", "retransmitted segments"),)),
    Row("C6.arq_mean", "expected completion, ideal selective repeat", "s", 0.756, M("fec", "arq_mean"),
        Measure("fec", "completion_ms", "off", statistic="pooled_mean", scale=1e-3), 0.15,
        note="measured: mean over every request of the udpreq ARQ arm (testbed/transport), "
             "14% loss on the request direction",
        cause="rounds longer than one RTT: the retransmission count is the ideal one (ideal "
              "245·p/(1−p) = 39.9 per request, 399 per 10-request run) and so are the rounds, but "
              "each retransmission round takes longer than the 200 ms the model charges (the "
              "transport's loss detection waits for an ACK or a timer after the RTT)",
        explain=(("retransmissions", "retransmitted symbols per run"),
                 ("arq_rounds", "transmission rounds per request"),
                 ("arq_round_ms", "ms per retransmission round (a request's symbols' span on the "
                                  "wire ÷ its retransmission rounds)"))),
    Row("C6.arq_p99", "p99 completion, ideal selective repeat", "s", 1.24, M("fec", "arq_quantile"),
        Measure("fec", "completion_ms", "off", statistic="pooled_p99", scale=1e-3), 0.25,
        note="measured: the 99th percentile of every request of the ARQ arm, from 100 requests "
             "(the full run's 10 runs x 10; --quick's 20 do not make a p99)",
        cause="non-ideal rounds (longer than one RTT)",
        explain=(("retransmissions", "retransmitted symbols per run"),
                 ("arq_round_ms", "ms per retransmission round"))),
    Row("C6.arq_p99_rounds", "rounds at p99", "rounds", 6, M("fec", "arq_quantile_rounds"),
        Measure("fec", "arq_rounds", "off", statistic="pooled_p99"), 0.25,
        note="measured: 1 + the highest round number of each request's symbols in the client "
             "capture (analysis/fec.py), p99 over 100 requests or more (the full run's)",
        cause="the ideal model's 6 rounds are a 1-in-100 event of the loss draws (testbed model fec "
              "gives the distribution): 100 requests see it or not",
        explain=(("arq_rounds", "rounds per request"),)),
    Row("C6.fec_repair", "FEC repair symbols for P ≥ 0.999", "symbols", 63, M("fec", "fec_repair"),
        Measure("fec", "first_round_repair", "adaptive", statistic="pooled_median"), 0.25,
        note="measured: per request, repair packets of its first transmission (round 0) on the "
             "client's wire, median over the requests",
        cause="adaptive redundancy follows the loss rate the sender estimates, not the prior"),
    Row("C6.fec_redundancy", "FEC redundancy", "1", 0.257, M("fec", "fec_redundancy"), None,
        unmeasured="model-only: r/n; C6.fec_repair measures r"),
    Row("C6.fec_send", "sending 308 symbols", "ms", 10.7, M("fec", "fec_send"),
        Measure("fec", "symbol_span_ms", "adaptive", statistic="pooled_median"), 0.25,
        note="measured: first to last symbol packet of a request's first transmission (round 0: "
             "the k + r symbols) on the client's wire, FEC arm — not repair symbols sent later "
             "while the ACK travels",
        cause="the UDP loop's pacing and wake-ups (testbed/transport) on a shared 2-core host "
              "send slower than the 333 Mbit/s line rate the model assumes",
        explain=(("symbol_span_ms", "ms to send the k + r symbols of round 0"),)),
    Row("C6.fec_completion", "FEC completion", "ms", 241, M("fec", "fec_completion"),
        Measure("fec", "completion_ms_median", "adaptive"), 0.10,
        cause="no retransmission (below), so the extra time is in sending the symbols (their "
              "span on the wire below, vs the model's 10.7 ms) and decoding them at the server",
        explain=(("retransmissions", "retransmitted symbols per run"),
                 ("symbol_span_ms", "ms to send the k + r symbols of round 0"), ("decode_ms", "server decode ms"))),
    # ---- C7 (the chapter's values are its author's measurements: medians over requests, so the
    # measured value is the median of every request of the level's runs, and the ratios are of
    # those same medians)
    Row("C7.direct_new", "direct, new connection per request (median)", "ms", 1185.3,
        M("connections", "direct_new"), Measure("reuse", "completion_ms", "new", statistic=_REQ_MEDIAN), 0.15,
        note="model: lower bound, 1 handshake RTT + 4 slow-start RTTs + 238.5 ms; the chapter's "
             "1185 ms is below it (its path's initial window or loss pattern differ).  Measured by "
             "the reuse experiment (same direct path and request as the relay experiment's direct arm)",
        cause="the handshake (below: the modelled 1 RTT, 1 s more when a SYN or SYN/ACK is lost "
              "on the 14% direction) and the data phase: the server's autotuned receive window "
              "limits early rounds (TCP_INFO rwnd_limited "
              "of the client's connections below; docs/findings.md: with --rcvbuf 4MB most requests take "
              "~1240 ms) and RTOs of responses lost on the 14% direction (retransmissions below)",
        explain=(("handshake_ms", "handshake ms"), ("rwnd_limited_ms", "ms rwnd-limited per connection"),
                 ("busy_ms", "ms busy per connection"), ("flights", "request flights"),
                 ("retransmissions", "retransmitted segments per run"))),
    Row("C7.relay_new", "relay, new connection per request (median)", "ms", 301.6,
        M("connections", "relay_new"),
        Measure("relay", "completion_ms", "relay", statistic=_REQ_MEDIAN, sets=OPTIMISTIC), 0.15,
        note="model: handshake, SOCKS5 and slow start on the LAN, the tunnel already open; measured "
             "with the client gateway answering SOCKS5 at once (params.connect_mode optimistic: "
             "the application's bytes follow the OPEN frame on the open tunnel) — "
             "C7.relay_new_confirmed waits for the far connect",
        cause="the response crosses the tunnel on the 14%-loss direction: a lost response segment "
              "costs the server gateway a retransmission timeout (~200 ms or more) — requests are "
              "~250 ms or 450 ms and more, and the slow ones match the tunnel's retransmissions "
              "below; the SOCKS5 reply itself takes about a millisecond (socks ms below)",
        cause_low="no lost response segment cost a retransmission timeout in most requests "
                  "(per-request ms below), so the median is the model's handshake, SOCKS5 and LAN "
                  "slow start with the tunnel open; the chapter's 301.6 ms holds ~61 ms more that "
                  "its brief does not break down",
        explain=(("socks_ms", "SOCKS5 reply ms after request_issued"),
                 ("completion_ms", "per-request ms"),
                 ("tunnel_retransmissions", "segments sent again on the tunnel per run"))),
    Row("C7.relay_new_confirmed", "relay, new connection, SOCKS5 reply after the far connect", "ms",
        301.6, M("connections", "relay_new", confirm_rtts=1),
        Measure("relay", "completion_ms", "relay", statistic=_REQ_MEDIAN, full_only=True), 0.15,
        note="the relay's default (params.connect_mode confirmed): the chapter's relay had its "
             "tunnels and far connections ready, so this row shows what one more long-haul RTT "
             "before the first byte costs (model: testbed model connections --confirm-rtts 1)",
        cause="the SOCKS5 reply waits for the far gateway's connect, one long-haul RTT (the "
              "SOCKS5 reply time below, vs C7.relay_new's)",
        explain=(("socks_ms", "SOCKS5 reply ms after request_issued"),
                 ("tunnel_retransmissions", "segments sent again on the tunnel per run"))),
    Row("C7.ratio_new", "direct / relay, new connections", "1", 3.93, M("connections", "ratio_new"),
        Measure("relay", "completion_ms", statistic="pooled_ratio", levels=("direct", "relay"),
                sets=OPTIMISTIC), 0.15,
        note="relay with params.connect_mode optimistic, as C7.relay_new",
        cause="the ratio divides this experiment's own direct and relay arms (per-request ms "
              "below), not the runs of C7.direct_new and C7.relay_new: in either arm a lost "
              "response segment (14% loss on that direction) costs a retransmission timeout — "
              "the direct connection's retransmitted segments and the relay tunnel's below — and "
              "a few such requests move a median of few requests",
        explain=(("completion_ms", "per-request ms"), ("retransmissions", "retransmitted segments"),
                 ("tunnel_retransmissions", "segments sent again on the tunnel per run"))),
    Row("C7.direct_keepalive", "direct, kept alive (median)", "ms", 240.9,
        M("connections", "direct_keepalive"), _KEPT_ALIVE, 0.10,
        cause="the request burst after idle overflows the bottleneck buffer",
        explain=(("retransmissions", "retransmitted segments"),)),
    Row("C7.relay_keepalive", "relay, kept alive (median)", "ms", 236.5,
        M("connections", "relay_keepalive"),
        Measure("relay", "completion_ms", "relay", statistic=_REQ_MEDIAN, sets={"params.mode": "reuse"}),
        0.10,
        cause="the response crosses the tunnel on the 14%-loss direction: a lost response segment "
              "costs the server gateway a retransmission timeout, so requests take ~245 ms or "
              "~700 ms (per-request ms below) and the slow ones go with the tunnel's "
              "retransmissions below (the client's own LAN connection retransmits nothing)",
        explain=(("completion_ms", "per-request ms"),
                 ("tunnel_retransmissions", "segments sent again on the tunnel per run"),
                 ("retransmissions", "retransmitted segments on the client's connection"))),
    Row("C7.ratio_keepalive", "direct / relay, kept alive", "1", 1.019,
        M("connections", "ratio_keepalive"),
        Measure("relay", "completion_ms", statistic="pooled_ratio", levels=("direct", "relay"),
                sets={"params.mode": "reuse"}), 0.10,
        cause="the ratio divides this experiment's own direct and relay arms (per-request ms "
              "below): in the relay arm a lost response segment on the tunnel, in the direct arm "
              "one on the connection (14% loss on that direction), costs a retransmission timeout "
              "(both counts below), and a few such requests move a median of few requests",
        explain=(("completion_ms", "per-request ms"), ("retransmissions", "retransmitted segments"),
                 ("tunnel_retransmissions", "segments sent again on the tunnel per run"))),
    # ---- C8
    Row("C8.fifo_audio", "FIFO: audio sent at", "s", 6, M("streams", "fifo_audio_done"),
        Measure("c8-order", "audio_done_ms", "fifo", sets=C8_ORDER, scale=1e-3), 0.10,
        note=_C8_HOW, cause="the image's bytes ahead of the audio (the image's own delivery below), "
        "slow start and the one-way delay", explain=_C8_EXPLAIN),
    Row("C8.prio_audio", "audio first: audio sent at", "s", 3, M("streams", "prio_audio_done"),
        Measure("c8-order", "audio_done_ms", "priority", sets=C8_ORDER, scale=1e-3), 0.10,
        note=_C8_HOW, cause="image bytes already in flight and in the bottleneck queue when the audio "
        "became ready are delivered before it, plus the one-way delay", explain=_C8_EXPLAIN),
    Row("C8.prio_image", "audio first: image sent at", "s", 6, M("streams", "prio_image_done"),
        Measure("c8-order", "image_done_ms", "priority", sets=C8_ORDER, scale=1e-3), 0.10,
        note=_C8_HOW, cause="slow start, losses in the bottleneck buffer and the one-way delay",
        explain=_C8_EXPLAIN),
    Row("C8.hol_audio", "HTTP/2 over TCP: audio delivered at", "s", 7, M("streams", "hol_audio_delivery"),
        Measure("c8-delivery", "audio_done_ms", "tcp", sets=C8_DELIVERY, scale=1e-3), 0.10,
        note=_C8_HOW + "; audio first; one image packet sent before the audio is dropped on the link "
        "(experiments/schedules/c8-image-loss.toml: the 1290th data frame, a per-frame event) and "
        "every TCP retransmission of its bytes with it until 7 s after the origin (copies_until = "
        "the model's repair input; the origin is set just before the client starts, 0.15-0.16 s "
        "before the session start in the --quick runs); after that TCP's own recovery repairs it",
        cause="TCP's sender stopped behind the hole: its window filled and the lost packet's "
              "retransmissions, all dropped until the moment, backed off (RTO) until one after it "
              "repaired the gap (longest gap's close below); only the audio sent before the hole "
              "stopped the sender was at the receiver, the rest followed the repair at the link "
              "rate (~1 s of audio): the model holds audio already at the receiver until the "
              "repair, here the sender held most of it back itself",
        explain=(("image_longest_gap_close_ms", "ms the image's longest gap closed (the lost packet)"),
                 ("audio_order_wait_max_ms", "max ms an audio chunk waited for other streams' bytes"),
                 ("audio_cross_wait_max_ms", "max ms from the audio's own bytes to its delivery"))),
    Row("C8.quic_audio", "QUIC per stream: audio delivered at", "s", 3,
        M("streams", "per_stream_audio_delivery"),
        Measure("c8-delivery", "audio_done_ms", "quic", sets=C8_DELIVERY, scale=1e-3), 0.10,
        note=_C8_HOW + "; audio first, one image packet lost as in C8.hol_audio, aioquic with the "
        "audio and the image on their own streams; its retransmission is a new encrypted packet "
        "the link cannot tie to the lost one (copies_until matches TCP bytes only), so aioquic "
        "repairs the image's gap within its own recovery (longest gap's close below) and the "
        "audio is not held",
        cause="image packets in flight before the audio, aioquic's pacing and the receiving "
              "process (cross wait below)",
        explain=(("image_longest_gap_close_ms", "ms the image's longest gap closed (the lost packet)"),
                 ("audio_cross_wait_max_ms", "max ms from the audio's own bytes to its delivery"))),
    Row("C8.fifo_usable", "FIFO: usable audio of 8 chunks", "s", 0,
        M("deadlines", "fifo_usable", image=2e6),
        Measure("streams-schedule", "audio_on_time", "fifo", sets=C8_DEADLINE, scale=0.02), 0.10,
        note=_C8_DEADLINE_NOTE, cause="chunks delivered before the image was complete",
        explain=(("audio_done_ms", "ms the last chunk was delivered"), ("image_done_ms", "image delivered ms"))),
    Row("C8.prio_usable", "media priority: usable audio", "s", 0.16,
        M("deadlines", "priority_usable", image=2e6),
        Measure("streams-schedule", "audio_on_time", "priority", sets=C8_DEADLINE, scale=0.02), 0.10,
        note=_C8_DEADLINE_NOTE, cause="image bytes in flight and in the bottleneck queue ahead of a "
        "chunk (TCP_NOTSENT_LOWAT keeps only the unsent queue in the application)",
        explain=(("audio_done_ms", "ms the last chunk was delivered"),
                 ("audio_delivered_ms", "ms each chunk was delivered"))),
    # ---- C9
    Row("C9.first_play", "first chunk plays at (J = 40 ms)", "ms", 78, M("audio", "first_play"),
        Measure("c9-audio", "audio_first_play_ms", "40ms", sets=C9_PIPELINE), 0.10,
        note=_C9_HOW, cause=_C9_CAUSE, explain=_C9_EXPLAIN),
    Row("C9.late_arrival", "late chunk 2 arrives at", "ms", 123, M("audio", "late_arrival"),
        Measure("c9-audio", "audio_late_arrival_ms", "40ms", sets=C9_PIPELINE), 0.10,
        note=_C9_HOW + "; the late chunk is the one latest relative to its place (analysis/audio.py)",
        cause=_C9_CAUSE, explain=_C9_EXPLAIN),
    Row("C9.stall", "stall with J = 40 ms", "ms", 5, M("audio", "stall_total"),
        Measure("c9-audio", "audio_stall_ms", "40ms", sets=C9_PIPELINE), 0.40,
        note=_C9_HOW + "; the wait player's total stall; tolerance ±2 ms: the timing of the "
             "server's sleeps and the client's receive on this machine (the late chunk's own "
             "arrival moves by that much)",
        cause=_C9_CAUSE, explain=_C9_EXPLAIN),
    Row("C9.min_j", "start delay J that avoids the stall", "ms", 45, M("audio", "min_start_delay"),
        Measure("c9-audio", "audio_min_start_ms", "45ms", sets=C9_PIPELINE), 0.10,
        note=_C9_HOW + "; max over chunks of r_i − r_0 − i·20 ms from the measured arrivals "
             "(analysis/audio.py), in the J = 45 ms runs",
        cause=_C9_CAUSE, explain=_C9_EXPLAIN),
    Row("C9.deficit_lasts", "60 ms of audio at 130 of 256 kbit/s lasts", "s", 0.12,
        M("audio-deficit", "lasts"),
        Measure("c9-deficit", "audio_lasts_ms", "60ms", sets=C9_DEFICIT, scale=1e-3), 0.20,
        note="measured: experiment c9-deficit — 16 kHz 16-bit PCM in 20 ms chunks (640 B) over UDP "
             "on a link that delivers the PCM at 130 kbit/s (698 B frames at 141.781 kbit/s); the "
             "initial buffer is the chapter's *amount* of audio (params.prebuffer 60 ms: playback "
             "starts once chunks 0-2 are in, start delay J = 0), measured: first underrun − first "
             "play of the wait player; tolerance 20 %: the audio arrives in whole 20 ms chunks, "
             "so the underrun falls on a chunk's slot (17 % of 0.12 s), the model is a fluid",
        cause="whole chunks: the buffer empties at a chunk's slot, not continuously",
        explain=(("audio_first_play_ms", "first play ms"), ("audio_stall_ms", "total stall ms"))),
    Row("C9.real_stall_max", "real path: total playback stall, worst of 8 receptions", "ms", 1440,
        None, Measure("c9-longhaul", "audio_stall_ms", "40ms", statistic="pooled_max", runs=8), 0.50,
        note="no model: the chapter's own measurement (360-1440 ms over 8 receptions); measured: "
             "experiment c9-longhaul — 2 s (the workload's default; the chapter does not give its "
             "streams' length) of 16 kHz 16-bit PCM (the format of its deficit example on this "
             "path) over TCP on the long-haul path "
             "(200 ms RTT, 14 % loss server→client), every reception complete; the wait player's "
             "total stall at J = 40 ms, the worst of the first 8 runs, the chapter's n (a worst of n "
             "grows with n; --quick: of 2); "
             "tolerance 50 %: the chapter gives a range (360-1440 ms) whose stream length and "
             "player buffer it does not state",
        cause="the PCM needs 256 kbit/s, above what TCP sustains at 14 % loss and 200 ms RTT "
              "(C5's Mathis bound ~0.19 Mbit/s): the stream falls behind the playback for its whole "
              "length, each lost segment's retransmission (RTT, RTO with backoff) adding to it, so "
              "the total stall grows with the stream (the smallest J without a stall below ≈ the "
              "delivery's lag at the end)",
        explain=(("audio_min_start_ms", "smallest J without a stall, ms"),
                 ("audio_first_play_ms", "first play ms"))),
    # ---- C10
    Row("C10.data_exchange", "data exchange, 1228 B packet", "µs", 302, M("airtime", "data_exchange"),
        None, unmeasured="model-only: the emulated air (testbed/emulator/airtime.py) is this same "
                         "model; packets cannot check it independently",
        note="a full 1500 B IP packet (Linux default) costs 342 µs (testbed model airtime)"),
    Row("C10.ack_exchange", "exchange carrying an end-to-end ACK", "µs", 134, M("airtime", "ack_exchange"),
        None, unmeasured="model-only: as C10.data_exchange",
        note="holds for the 92 B ACK: a 128 B MAC frame (92 + 36 B MAC header/LLC/FCS)"),
    Row("C10.exchange_reduction", "exchange shorter by", "1", 0.56, M("airtime", "exchange_reduction"),
        None, unmeasured="model-only: as C10.data_exchange"),
    Row("C10.image_airtime", "image airtime, data + feedback exchanges", "s", 13.4,
        M("airtime", "image_airtime"),
        Measure("c10-image", "air_busy_ms", "quick", sets=MSS1168, scale=1e-3), 0.10,
        note="measured: C1's image request (30 MB up, 0.3 s, 5 MB down, no warm-up) on the wifi "
             "air, one end-to-end ACK per segment (quick), " + CHAPTER_MSS + "; the time the medium "
             "was busy, from the frame logs' busy intervals (analysis/airtime.py medium_busy: each "
             "frame from when it had the air to its MAC ACK's end), data and feedback frames alike; "
             "model 13.07 s: C1's 1168 B payloads give 29,966 exchanges each way; the chapter's "
             "30,800 (= 35 MB / 1136 B) gives 13.43 s",
        cause="Linux's frames: 1220 B data packets and 52 B ACKs (the chapter's 1228 B and 92 B), "
              "and fewer exchanges than the chapter's 30,800 (frames below)",
        explain=(("air_data_frames", "data frames on the air"), ("air_feedback_frames", "feedback frames"),
                 ("air_data_busy_ms", "ms of air for data"), ("air_feedback_busy_ms", "ms of air for feedback"))),
    # ---- C11
    Row("C11.split", "split 20 MB + 10 MB over 20 and 10 Mbit/s", "s", 8, M("split", "split_time"),
        Measure("multipath", "completion_ms", "split", statistic="pooled_median", sets=SPLIT30,
                scale=1e-3), 0.10,
        note="measured: the multipath experiment's 2:1 split over two connections on dualpath, "
             "30 MB, the common egress unshaped (the chapter's two independent paths); completion "
             "from before the first connect to the last byte acknowledged",
        cause="two handshakes and slow start on each path",
        explain=(("path_done_ms", "per-connection done ms"),)),
    Row("C11.fast_only", "fast path alone", "s", 12, M("split", "fast_path_only"),
        Measure("multipath", "completion_ms", "single", statistic="pooled_median", sets=SPLIT30,
                scale=1e-3), 0.10,
        note="measured: the multipath experiment's single arm (fast path only), as C11.split",
        cause="handshake and slow start"),
    Row("C11.p_fail", "duplicate: failure probability", "1", 0.025, M("duplicate", "p_fail"),
        Measure("c11-fail", "attempt_failed", "duplicate", statistic="pooled_mean", sets=C11_FAIL), 0.40,
        note="measured: experiment c11-fail — 400 attempts per run (a 640 B chunk every 10 ms, a copy "
             "on each access path of dualpath, dedup by chunk number); path failures p1 = 10 %, "
             "p2 = 5 %: the access links' seeded loss (a new seed every run); the common endpoint's "
             "failure q = 2 %: seeded attempts (random.Random(11), experiments/schedules/"
             "c11-common-failure.toml, the same attempts in every run) whose copy a per-frame event "
             "drops on both paths; the fraction of attempts with no copy, pooled over the runs, CI "
             f"bootstrap; {attempts_needed(0.025, 0.005)} attempts make the 95 % CI at 2.5 % "
             "exclude 0.5 % (n: attempts); tolerance 40 %: the binomial spread of ~800 attempts "
             "(--quick) at 2.5 % is ±1.1 points",
        cause=f"the draws: the seeded common failures are {len(c11_common_failures())} of 400 "
              "attempts and the paths' loss is drawn anew every run (per-run fractions below)",
        explain=(("failed_fraction", "failed fraction per run"), ("delivered_fraction", "delivered fraction"))),
    Row("C11.dup_bytes", "duplicate: bytes of 8 x 640 B chunks", "B", 10240, M("duplicate", "bytes"),
        Measure("duplicate", "received_bytes", "duplicate", sets=C11_BYTES), 0.02,
        note="measured: experiment duplicate with 8 chunks of 640 B and no loss: the payload bytes "
             "of every copy that reached the server application over both access paths (first "
             "copies and the duplicates it dropped by chunk number)",
        cause="copies lost on a path or not sent", explain=(("delivered_fraction", "delivered fraction"),)),
    # ---- C12
    Row("C12.extra_once", "extra time of one new connection (2 RTTs)", "s", 0.4,
        M("setup", "extra_once"),
        Measure("c12-agent", "completion_ms_median", statistic="difference", levels=("false", "true"),
                scale=1e-3), 0.25,
        note="measured: per-round completion, new TLS connection every round minus reuse",
        cause="slow start on every new connection adds rounds beyond the 2 handshake RTTs, and "
              "the kept connection restarts after its 2.3 s idle with Linux halving its cwnd once "
              "per RTO idle, down to the initial window: from 10 segments, or from 14 when the "
              "last upload ended with a larger cwnd, a round ~0.1 s shorter (per-round ms below)",
        explain=(("handshake_ms", "handshake ms"), ("completion_ms", "per-round ms"))),
    Row("C12.total_reuse", "30 rounds, one connection", "s", 105.4, M("setup", "total_reuse"),
        Measure("c12-agent", "agent_total_30", "true", statistic="pooled_median", sets=KEPT), 0.05,
        note=_AGENT_SCALED + "; one TLS connection opened before round 0 (its 2 RTTs in setup_s)"
        + _KEPT_NOTE,
        cause="the uploads' headers (0.8 MB in 1448 B payloads: 3.6 % more time on the wire) and "
              "the rounds' own overheads beyond the model's (whole rounds below)",
        explain=_AGENT_EXPLAIN),
    Row("C12.total_reconnect", "30 rounds, reconnect every round", "s", 117, M("setup", "total_reconnect"),
        Measure("c12-agent", "agent_total_30", "false", statistic="pooled_median", sets=KEPT), 0.05,
        note=_AGENT_SCALED + "; a new TCP + TLS connection every round (the runs of C12.total_reuse's "
                             "experiment: slow start after idle does not apply to a new connection)",
        cause="slow start on every new connection adds rounds beyond the 2 handshake RTTs",
        explain=_AGENT_EXPLAIN),
    # ---- C13
    Row("C13.total", "30 rounds of 3.5 s", "s", 105, M("agent", "total"),
        Measure("c12-agent", "agent_total_30", "true", statistic="pooled_median", sets=KEPT), 0.05,
        note=_AGENT_SCALED + "; the kept connection (C12.total_reuse's runs: the chapter's 105 s "
                             "leaves the one opening, 0.4 s, out)" + _KEPT_NOTE,
        cause="as C12.total_reuse", explain=_AGENT_EXPLAIN),
    Row("C13.compressed_total", "30 rounds, compressed screenshots", "s", 83, M("agent", "compressed_total"),
        Measure("c12-agent", "agent_total_30", "true", statistic="pooled_median", sets=COMPRESSED), 0.05,
        note=_AGENT_SCALED + "; the screenshot encoded to 0.2 MB in a 30 ms timed step each round "
                             "(params.screenshot 0.2MB, params.encode 30ms), kept connection"
        + _KEPT_NOTE,
        cause=_UPLOADS.format(rounds="per-request ms below vs the model's 2.45 s"),
        explain=_AGENT_EXPLAIN + (("completion_ms", "per-request ms"),)),
    Row("C13.break_even", "compression faster while rounds N' <", "rounds", 37.8,
        M("agent", "break_even_rounds"), None,
        unmeasured="model-only: a break-even count of rounds, not an event on the wire"),
    # ---- C14
    Row("C14.phone", "20 rounds on the phone", "s", 64.0, M("placement", "total_phone"), None,
        unmeasured="model-only: no network involved (the model runs on the phone)"),
    Row("C14.workstation", "20 rounds on the nearby workstation", "s", 11.0,
        M("placement", "total_workstation"),
        Measure("c14-edge", "agent_total_20", "true", statistic="pooled_median"), 0.10,
        note=_PLACE.format(host="edge", quick=" (the run has 20 rounds: its total_s)"),
        cause="the connection's opening and slow start of each upload after the idle model and "
              "terminal pause, beyond the model's 0.08 s per 0.8 MB at 80 Mbit/s",
        explain=_AGENT_EXPLAIN),
    Row("C14.cloud", "20 rounds in the cloud region", "s", 31.6, M("placement", "total_cloud"),
        Measure("c14-cloud", "agent_total_20", "none", statistic="pooled_median"), 0.10,
        note=_PLACE.format(host="cloud", quick=" (--quick: of a 10-round run)"),
        cause=_UPLOADS.format(rounds="whole rounds below vs the model's 1.573 s"),
        explain=_AGENT_EXPLAIN),
    Row("C14.min_uplink", "cloud meets 45 s from uplink", "Mbit/s", 3.8, M("placement", "cloud_min_uplink"),
        None, unmeasured="model-only: a break-even rate"),
    Row("C14.disconnect_keep", "one disconnect, 9 committed rounds kept", "s", 34.2,
        M("placement", "disconnect_keep"),
        Measure("c14-cloud", "agent_total_20", "10-keep", statistic="pooled_median"), 0.10,
        note=_DISCONNECT + "the commit log kept the 9 confirmed rounds: round 10 is sent again with "
                           "its operation id, which the server does not execute twice (so the "
                           "redone round has no 0.073 s model time; the model charges a whole round)",
        cause=_DISCONNECT_CAUSE, explain=_DISCONNECT_EXPLAIN),
    Row("C14.disconnect_lose", "one disconnect, all 10 rounds lost", "s", 48.3,
        M("placement", "disconnect_lose"),
        Measure("c14-cloud", "agent_total_20", "10-lose", statistic="pooled_median"), 0.10,
        note=_DISCONNECT + "nothing kept: rounds 1-10 again in a new session (new operation ids, "
                           "executed again)",
        cause=_DISCONNECT_CAUSE, explain=_DISCONNECT_EXPLAIN),
    # ---- C15
    Row("C15.cost", "migration cost M (64 MiB at 80 Mbit/s + 1 s)", "s", 7.7, M("migration", "cost"),
        Measure(_MIGRATE, "completion_ms_median", "1s", scale=1e-3), 0.10,
        note=_MIGRATE_NOTE, cause=_MIGRATE_CAUSE, explain=_MIGRATE_EXPLAIN),
    Row("C15.break_even", "migration pays off from round", "round", 20, M("migration", "break_even_round"),
        Measure(_MIGRATE, "completion_ms_median", "1s", scale=1e-3, per=_SAVING), 0.0,
        note=_BREAK_EVEN_NOTE + "C15.cost",
        cause="the measured cost or saving differs from the chapter's 7.7 s and 0.4 s (both "
              "measured: C15.cost, C12.extra_once)"),
    Row("C15.break_even_2s", "pays off from round, 2 s restore", "round", 22,
        M("migration", "break_even_round", restore=2.0),
        Measure(_MIGRATE, "completion_ms_median", "2s", scale=1e-3, per=_SAVING), 0.0,
        note=_BREAK_EVEN_NOTE + "the same migration with a 2 s restore (c15-migration level 2s)",
        cause="as C15.break_even (C12.extra_once, the 2 s level's cost)"),
)


def select(ids: list[str] | None) -> list[Row]:
    """Rows of the given cases (C1, C7) or row ids (C7.ratio_new), in either case (c7); all when
    empty or 'all'."""
    ids = ["all" if i.lower() == "all" else i[:1].upper() + i[1:] for i in ids or []]
    if not ids or ids == ["all"]:
        return list(ROWS)
    cases = {r.case for r in ROWS}
    valid = f"valid: all, {', '.join(sorted(cases, key=lambda c: int(c[1:])))} or a row id"
    if "all" in ids:
        raise ValueError(f"cases {' '.join(ids)}: 'all' selects every case, so it goes alone; {valid}")
    unknown = [i for i in ids if i not in cases and i not in {r.id for r in ROWS}]
    if unknown:     # an empty argument shown as '' (not as nothing)
        raise ValueError(f"unknown case(s) {', '.join(i if i.strip() else repr(i) for i in unknown)}; {valid}")
    return [r for r in ROWS if r.case in ids or r.id in ids]


def within(measured: float | None, chapter: float, tolerance: float) -> bool | None:
    if measured is None or not math.isfinite(measured):
        return None
    return abs(measured - chapter) <= tolerance * abs(chapter) + 1e-12
