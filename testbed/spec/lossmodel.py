"""Loss models of a ``LinkSpec`` (Bernoulli, Gilbert–Elliott, a drop list), their parsing from
human units and their dict form.  Re-exported by ``linkspec``; the emulator's generators are in
``testbed.emulator.loss``."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Mapping, Union

from testbed.spec.units import parse_count, parse_probability


@dataclass(frozen=True)
class Bernoulli:
    """Independent random loss: every frame is lost with probability ``p``."""
    p: float = 0.0

    def __post_init__(self):
        _check_prob("loss", self.p)

    @property
    def mean_loss(self) -> float:
        return self.p


@dataclass(frozen=True)
class GilbertElliott:
    """Two-state Markov loss, parameters as netem's ``loss gemodel p r 1-h 1-k``.

    p: P(good→bad) per frame; r: P(bad→good) per frame; loss_bad (1−h): loss probability in
    the bad state; loss_good (1−k): loss probability in the good state.
    """
    p: float
    r: float
    loss_bad: float = 1.0
    loss_good: float = 0.0

    def __post_init__(self):
        for name in ("p", "r", "loss_bad", "loss_good"):
            _check_prob(f"gilbert-elliott {name}", getattr(self, name))
        if self.p + self.r == 0:
            raise ValueError("gilbert-elliott: p and r cannot both be 0 (the chain never moves)")

    @property
    def mean_loss(self) -> float:
        """Stationary loss rate: π_bad·(1−h) + π_good·(1−k), π_bad = p/(p+r)."""
        bad = self.p / (self.p + self.r)
        return bad * self.loss_bad + (1 - bad) * self.loss_good


@dataclass(frozen=True)
class DropList:
    """Deterministic loss for tests: drop the frames with these 0-based indices (userspace only)."""
    indices: frozenset[int] = frozenset()

    @property
    def mean_loss(self) -> float:
        return float("nan")


LossModel = Union[Bernoulli, GilbertElliott, DropList]


def _check_prob(name: str, value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (0.0 <= value <= 1.0):
        raise ValueError(f"{name} {value!r} is outside [0, 1]; give a probability like 0.14 or '14%'")


def loss_to_dict(loss: LossModel) -> dict[str, Any]:
    """``{"model": "bernoulli"|"gilbert-elliott"|"droplist", ...}``, as in ``LinkSpec.to_dict``."""
    if isinstance(loss, DropList):
        return {"model": "droplist", "indices": sorted(loss.indices)}
    if isinstance(loss, GilbertElliott):
        return {"model": "gilbert-elliott", **dataclasses.asdict(loss)}
    return {"model": "bernoulli", "p": loss.p}


#: the fields of each loss model's dict form (``loss_to_dict``)
_DICT_FIELDS = {"bernoulli": ("p",), "gilbert-elliott": ("p", "r", "loss_bad", "loss_good"),
                "droplist": ("indices",)}


def loss_from_dict(d: Mapping[str, Any]) -> LossModel:
    """The inverse of ``loss_to_dict``; probabilities may be given as '14%'."""
    d = dict(d)
    model = d.pop("model", "bernoulli")
    fields = _DICT_FIELDS.get(str(model), ())
    if not fields or set(d) - set(fields) or (model == "gilbert-elliott" and not {"p", "r"} <= set(d)) \
            or not isinstance(d.get("indices", []), list):
        raise ValueError(f"loss {dict(d, model=model)!r}: give model = bernoulli (p), gilbert-elliott "
                         "(p, r, loss_bad, loss_good) or droplist (indices: a list of frame numbers)")
    if model == "droplist":
        return DropList(frozenset(parse_count(i, "droplist index") for i in d.get("indices", ())))
    values = {k: parse_probability(v) for k, v in d.items()}
    return GilbertElliott(**values) if model == "gilbert-elliott" else Bernoulli(**values)


def parse_loss(value: Any) -> LossModel:
    """'14%', 0.14 → Bernoulli; 'ge:p,r[,1-h[,1-k]]' → GilbertElliott (netem's gemodel order)."""
    if isinstance(value, (Bernoulli, GilbertElliott, DropList)):
        return value
    if isinstance(value, str) and value.lower().startswith(("ge:", "gemodel:")):
        numbers = [parse_probability(v) for v in value.split(":", 1)[1].split(",")]
        if not 2 <= len(numbers) <= 4:
            raise ValueError(f"gilbert-elliott loss {value!r}: give 2 to 4 values p,r[,1-h[,1-k]]")
        return GilbertElliott(*numbers)
    return Bernoulli(parse_probability(value))

