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


def test_the_arms_are_resolved_once(monkeypatch):
    """``validate`` resolved every arm on each call, and ``draws_at_random``, ``rebuilt_why`` and
    the runner each call it (three times over for `testbed reproduce --quick`); the plans are
    now kept, also by a ``replace`` of what they do not depend on (reps, warmup), not of a level."""
    from experiments import load_definition
    from testbed.run import plan
    resolved = []
    real = plan.resolve
    monkeypatch.setattr(plan, "resolve", lambda spec: (resolved.append(spec), real(spec))[1])
    exp = load_definition("reuse")
    exp.draws_at_random()
    quick = exp.replace(reps=2, warmup=0)
    quick.rebuilt_why()
    plans = quick.validate()
    assert len(resolved) == len(exp.labels) == 2 and plans is exp.validate()
    one = quick.replace(levels=quick.levels[:1])
    assert list(one.validate()) == [one.labels[0]] and len(resolved) == 3


@pytest.mark.parametrize("levels, cross, words", [
    ('[]', "", "factor 'socket.cc' has 0 levels; allowed: two or more levels (narrow a run to one with --levels)"),
    ('["cubic"]', "", "factor 'socket.cc' has 1 level; allowed: two or more levels"),
    ('["cubic", "bbr"]', 'cross = { factor = "links.bottleneck.up.queue", levels = [] }',
     "cross factor 'links.bottleneck.up.queue' has 0 levels; allowed: two or more levels"),
    ('["cubic", "bbr"]', 'cross = { factor = "links.bottleneck.up.queue", levels = ["20"] }',
     "cross factor 'links.bottleneck.up.queue' has 1 level; allowed: two or more levels "
     "(narrow a run to one with --cross-levels)"),
])
def test_a_definition_file_compares_two_or_more_levels_of_each_factor(tmp_path, levels, cross, words):
    """An empty list of levels was "allowed: one or more levels", and a crossed factor of one
    level was taken; a file defines a comparison (the command line may narrow a run to one arm)."""
    from experiments.definition import read_definition
    from testbed.spec.errors import UsageError
    path = tmp_path / "one.toml"
    path.write_text(f'name = "one"\nfactor = "socket.cc"\nlevels = {levels}\nmetrics = ["goodput_mbps"]\n'
                    f'{cross}\n[base]\ntopology = "image"\nworkload = "bulk"\n')
    with pytest.raises(UsageError) as err:
        read_definition(path)
    msg = str(err.value)
    assert msg.startswith(f"{path}: experiment 'one': ") and words in msg, msg
