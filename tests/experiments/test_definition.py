"""experiments/definition.py: a level's label, its name in run directories and on the command line."""
import pytest

from experiments.definition import Experiment, cli_levels, level_label


@pytest.mark.parametrize("value, label", [
    ("max:10ms", "max-10ms"), ("0.5%", "0.5pct"), ("/a/b/cell-edge.toml", "cell-edge.toml"),   # the docstring's
    ("-2s", "minus2s"), (-3, "minus3"), ("-0.5%", "minus0.5pct"), (True, "true"),
])
def test_a_label_is_a_file_name_and_never_an_option(value, label):
    assert level_label(value) == label


def test_a_negative_level_is_distinct_from_its_positive():
    """`-2s` was labelled `2s` (its '-' stripped), so levels `2s` and `-2s` were refused as "not
    distinct"; `-2s` is `minus2s`, and the command line names it either way."""
    exp = Experiment(name="sign", factor="params.think", levels=("2s", "-2s"), metrics=("completion_ms",),
                     base={"topology": "longhaul", "workload": "reqresp"}, check="none")
    assert exp.labels == ("2s", "minus2s")
    assert exp.level("-2s") == exp.level("minus2s") == "-2s"
    assert exp.with_overrides(levels=cli_levels("-2s")).levels == ("-2s",)
    assert exp.with_overrides(levels=cli_levels("minus2s,2s")).levels == ("-2s", "2s")
