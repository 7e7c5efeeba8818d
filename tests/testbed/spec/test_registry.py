"""``Registry``: records by name, one per name, loaders run once before the first lookup."""
from dataclasses import dataclass

import pytest

from testbed.spec.errors import UsageError
from testbed.spec.registry import Registry


@dataclass(frozen=True)
class Rec:
    name: str


def test_get_returns_the_record_and_an_unknown_name_lists_the_allowed_ones():
    reg = Registry("widget", also="a path to a .py file")
    a, b = reg.register(Rec("a")), reg.register(Rec("b"))
    assert reg.get("a") is a and reg["b"] is b and "a" in reg and "z" not in reg
    with pytest.raises(UsageError, match=r"^unknown widget 'z'; allowed: a, b \(or a path to a \.py file\)$"):
        reg.get("z")
    with pytest.raises(UsageError, match=r"^unknown thing 'z'; allowed: none$"):
        Registry("thing").get("z")


def test_records_keep_their_order_and_register_works_as_a_decorator():
    reg = Registry("topology")

    @reg.register
    class Second:
        name = "second"
    reg.register(Rec("first"))
    assert reg.get("second") is Second
    assert reg.names() == list(reg) == ["second", "first"] and len(reg) == 2
    assert [n for n, _ in reg.items()] == ["second", "first"] and reg.values()[1] == Rec("first")


def test_a_second_record_of_a_name_is_refused_and_the_same_one_is_not_added_twice():
    reg = Registry("workload")
    rec = reg.register(Rec("bulk"))
    assert reg.register(rec) is rec and len(reg) == 1
    with pytest.raises(ValueError, match="workload 'bulk' is already registered"):
        reg.register(Rec("bulk"))
    with pytest.raises(ValueError, match="a workload needs a name"):
        reg.register(Rec(""))


def test_loaders_run_once_before_the_first_lookup():
    reg = Registry("model")
    calls = []

    def loader():
        calls.append(reg.names())           # a lookup while loading sees what is in so far
        reg.register(Rec("mine"))
    reg.register(Rec("builtin"))
    reg.add_loader(loader)
    assert calls == []                      # registering does not load
    assert reg.get("mine") == Rec("mine")
    assert calls == [["builtin"]]
    reg.names(), reg.get("builtin"), "x" in reg
    assert calls == [["builtin"]]
