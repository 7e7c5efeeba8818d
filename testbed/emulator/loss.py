"""Random-loss generators for the emulator's loss stage.

Every generator is called once per frame that *reaches the loss stage* (frames refused by the
bottleneck queue never do) and answers ``True`` when that frame is lost.  Randomness comes from
the ``random.Random`` handed in, so a seeded generator replays the same loss pattern.

- ``Bernoulli(p)``: each frame lost independently with probability p.
- ``GilbertElliott(p, r, loss_bad, loss_good)``: netem's ``loss gemodel p r 1-h 1-k``, step for
  step as the kernel's ``loss_gilb_ell()``: the chain starts in the good state; for every frame
  it first draws the transition out of the current state (good→bad with p, bad→good with r),
  then draws the loss with the loss probability of the state the frame *started in*
  (1−k = ``loss_good`` in good, 1−h = ``loss_bad`` in bad).  Stationary loss rate
  π_bad·(1−h) + π_good·(1−k) with π_bad = p/(p+r).  Draws whose probability is 0 or 1 are
  skipped (they cannot change the outcome), so such patterns cost one draw per frame.
- ``DropList(indices)``: the frame with 0-based index i among the frames that reached the loss
  stage of this direction is lost iff i is in ``indices``.  No randomness.
"""
from __future__ import annotations

import random
from typing import Callable

from testbed.spec.linkspec import Bernoulli, DropList, GilbertElliott, LossModel

LossFn = Callable[[], bool]


def make_loss(model: LossModel, rng: random.Random) -> LossFn | None:
    """A zero-argument callable answering "is this frame lost?", or None for no loss at all."""
    if isinstance(model, Bernoulli):
        if model.p == 0.0:
            return None
        if model.p == 1.0:
            return lambda: True
        draw, p = rng.random, model.p
        return lambda: draw() < p
    if isinstance(model, GilbertElliott):
        return _GilbertElliott(model, rng).lost
    if isinstance(model, DropList):
        return _DropList(model.indices).lost
    raise ValueError(f"unknown loss model {model!r}; use Bernoulli, GilbertElliott or DropList")


class _GilbertElliott:
    __slots__ = ("_draw", "_p", "_r", "_loss_bad", "_loss_good", "bad")

    def __init__(self, model: GilbertElliott, rng: random.Random):
        self._draw = rng.random
        self._p, self._r = model.p, model.r
        self._loss_bad, self._loss_good = model.loss_bad, model.loss_good
        self.bad = False

    def lost(self) -> bool:
        draw = self._draw
        if self.bad:
            if draw() < self._r:
                self.bad = False
            h = self._loss_bad
            return h == 1.0 or (h != 0.0 and draw() < h)
        if draw() < self._p:
            self.bad = True
        k = self._loss_good
        return k == 1.0 or (k != 0.0 and draw() < k)


class _DropList:
    __slots__ = ("_indices", "_next")

    def __init__(self, indices: frozenset[int]):
        self._indices = indices
        self._next = 0

    def lost(self) -> bool:
        i = self._next
        self._next = i + 1
        return i in self._indices
