"""A model of the user's own (a plugin file on TESTBED_PATH) of the wrong shape is refused, one
line naming the model, its file where it runs and what is allowed: a params class without
``@dataclass`` had silently no parameters, outputs that are not ``Q`` an AttributeError traceback."""
from dataclasses import dataclass

import pytest

from analysis.models.base import Model, Params, Q, param
from testbed.spec.errors import UsageError


@dataclass(frozen=True)
class BdpParams(Params):
    rate: float = param(50e6, "bit/s", "bottleneck rate")
    rtt: float = param(0.02, "s", "round-trip time")


def bdp(p):
    return {"bdp": Q(p.rate * p.rtt / 8, "B", "bytes in flight that fill the path")}


class NoDataclass(Params):           # @dataclass forgotten: Params' (no) fields
    rate: float = param(50e6, "bit/s", "bottleneck rate")


@dataclass(frozen=True)
class PlainField(Params):
    rate: float = 50e6


@dataclass(frozen=True)
class NotParams:
    rate: float = param(50e6, "bit/s", "bottleneck rate")


@dataclass(frozen=True)
class JsonField(Params):
    json: float = param(1.0, "1", "a name testbed model has for itself")


@pytest.mark.parametrize("kw,words", [
    ({"params": NoDataclass}, "model 'bdp': params NoDataclass has no @dataclass of its own (its fields "
                              "would be plain class attributes: no parameters); allowed: "
                              "@dataclass(frozen=True) on the line before class NoDataclass"),
    ({"params": PlainField}, "model 'bdp': parameter rate of PlainField is not declared with param(); "
                             "allowed: rate: float = param(default, unit, help), unit one of B, bit/s"),
    ({"params": NotParams}, "model 'bdp': params 'NotParams' is not a Params subclass; allowed: "
                            "@dataclass(frozen=True) class XParams(Params)"),
    ({"params": JsonField}, "model 'bdp': parameter name 'json' (an option or attribute of testbed model "
                            "itself); allowed: any other name"),
    ({"name": "list"}, "model 'list': name 'list'; allowed: a non-empty name other than list"),
    ({"case": None}, "model 'bdp': case None; allowed: a string"),
    ({"fn": "bdp"}, "model 'bdp': fn 'bdp'; allowed: a function params -> {name: Q(value, unit, help)}"),
])
def test_a_model_record_of_the_wrong_shape_is_refused_naming_what_is_allowed(kw, words):
    with pytest.raises(ValueError) as exc:
        Model(**{"name": "bdp", "case": "", "help": "the BDP", "params": BdpParams, "fn": bdp, **kw})
    assert str(exc.value).startswith(words), exc.value


@pytest.mark.parametrize("fn,words", [
    (lambda p: {"bdp": p.rate * p.rtt / 8}, "output 'bdp' is float 125000.0, not a Q; allowed: a dict "
                                            "{name: Q(value, unit, help)}"),
    (lambda p: Q(1.0, "B"), "returned Q Q(value=1.0, unit='B', help=''); allowed: a dict"),
    (lambda p: {}, "returned dict {}; allowed: a dict {name: Q(value, unit, help)}"),
])
def test_outputs_that_are_not_q_are_one_line_naming_the_models_file(fn, words):
    model = Model("bdp", "", "the BDP", BdpParams, fn)
    with pytest.raises(UsageError) as exc:
        model.evaluate()
    assert str(exc.value).startswith(f"model 'bdp' ({__file__})") and words in str(exc.value), exc.value


def test_a_model_of_the_right_shape_evaluates():
    assert Model("bdp", "", "the BDP", BdpParams, bdp).evaluate(rtt=0.1)["bdp"].value == 625000
