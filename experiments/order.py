"""The order of an experiment's runs and every run's link seed: a pure function of the definition.

* ``alternate``: A B A B ... (with three levels A B C A B C), Pantheon's interleaving.
* ``abba``: A B, B A, A B, ... — the block order flips every repetition, so a drift that is
  linear in time adds the same amount to every arm.
* ``random``: randomized complete blocks: every repetition runs each level once, in an order
  drawn from a generator seeded by the experiment seed (a reshuffle per block, unlike Pantheon's
  single shuffle).

Warm-up runs (``warmup`` per level, alternated) come first and are never analysed.  Every
repetition gets its own link seed, derived from the experiment seed and the repetition with
``numpy.random.SeedSequence`` (so repetitions do not replay one loss pattern); the arms of one
repetition share it (common random numbers: the same loss draws for both arms).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from experiments.definition import Experiment


@dataclass(frozen=True)
class Slot:
    index: int          # position in the experiment, 0-based; the run directory is NNN-LEVEL
    level: str          # level label
    rep: int            # repetition (0-based); warm-ups count separately
    warmup: bool
    seed: int           # the run's link seed (RunSpec.seed)

    @property
    def dirname(self) -> str:
        return f"{self.index:03d}-{'warmup-' if self.warmup else ''}{self.level}"

    def to_dict(self) -> dict:
        return {"index": self.index, "level": self.level, "rep": self.rep, "warmup": self.warmup,
                "seed": self.seed, "dir": f"runs/{self.dirname}"}


def rep_seed(experiment_seed: int, rep: int, warmup: bool = False) -> int:
    """The link seed of one repetition: 31 bits of SeedSequence([seed, warmup, rep])."""
    state = np.random.SeedSequence([int(experiment_seed), int(warmup), int(rep)]).generate_state(1)
    return int(state[0] & 0x7FFFFFFF) or 1


def block_order(labels: tuple[str, ...], order: str, rep: int, rng: np.random.Generator) -> list[str]:
    if order == "alternate":
        return list(labels)
    if order == "abba":
        return list(labels if rep % 2 == 0 else labels[::-1])
    if order == "random":
        return [labels[i] for i in rng.permutation(len(labels))]
    raise ValueError(f"unknown order {order!r}")


def grow(done: list[dict], exp: Experiment) -> list[Slot]:
    """The schedule of ``exp`` continuing an earlier one (``done``: its slots as ``to_dict``)
    that ran fewer repetitions, levels or cells: the earlier slots keep their index and
    directory, the runs ``exp`` adds follow them, repetition block by repetition block (within a
    block in ``exp``'s order), so each new block still alternates the arms."""
    old = [Slot(d["index"], d["level"], d["rep"], d["warmup"], d["seed"]) for d in done]
    have = {(s.warmup, s.rep, s.level) for s in old}
    slots = list(old)
    for s in schedule(exp):
        if (s.warmup, s.rep, s.level) not in have:
            slots.append(Slot(len(slots), s.level, s.rep, s.warmup, s.seed))
    return slots


def schedule(exp: Experiment) -> list[Slot]:
    """Every run of the experiment in execution order."""
    rng = np.random.default_rng(np.random.SeedSequence([int(exp.seed), 2]))
    slots: list[Slot] = []
    for warmup, reps in ((True, exp.warmup), (False, exp.reps)):
        for rep in range(reps):
            seed = rep_seed(exp.seed, rep, warmup)
            for label in block_order(exp.labels, "alternate" if warmup else exp.order, rep, rng):
                slots.append(Slot(len(slots), label, rep, warmup, seed))
    return slots
