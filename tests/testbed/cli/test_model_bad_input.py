"""``testbed model``: a bad value is one line naming the option, the value and what is allowed, exit
2 — no traceback, and nothing that runs for minutes."""
import time

import pytest

from testbed.cli import main


@pytest.mark.parametrize("argv,words", [
    (["fec", "--size", "0"], "--size 0.0 out of range; must be > 0 and <= 1e+12 (B)"),
    (["slowstart", "--iw=inf"], "--iw inf out of range; must be a whole number > 0 and <= 100000 (count)"),
    (["audio", "--chunks=inf"], "--chunks inf out of range; must be a whole number > 0 and <= 100000"),
    (["fec", "--loss", "0.999", "--packets", "1000"], "no repair count up to 100000 reaches 0.999 at loss 0.999"),
    (["fec", "--rtt=-1"], "argument --rtt: invalid time value: '-1' (cannot read duration '-1': expected a "
                          "non-negative number with a unit; units: s"),
    (["fec", "--loss", "abc"], "invalid number value: 'abc' (cannot read probability 'abc'"),
    (["audio", "--chunks", "abc"], "invalid whole number value: 'abc' (give a whole number, e.g. 10)"),
    # a size too large for a float: was an OverflowError; a tau of no whole ns: a ZeroDivisionError
    (["serial", "--upload=1e400"], "invalid size value: '1e400' (size '1e400' is too large: not a finite number"),
    (["blocks", "--outputs=1MB,1e300GB"], "size '1e300GB' is too large: not a finite number of bytes"),
    (["audio", "--tau=1e-300"], "--tau 1e-300 out of range; must be >= 1e-06 and <= 1e+06 (s)"),
])
def test_a_bad_model_value_is_one_line_with_the_allowed_range(capsys, restore_logging, argv, words):
    start = time.monotonic()
    try:
        code = main(["model", *argv])
    except SystemExit as exc:      # argparse's own errors
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2 and words in err and err.count("\n") == 1, err
    assert "; valid: --" not in err         # the allowed values, not the option names
    assert time.monotonic() - start < 10


@pytest.mark.parametrize("model,value,words", [
    ("audio", {"chunks": 10**12}, "--chunks 1000000000000 out of range; must be a whole number > 0 and <= 100000"),
    ("deadlines", {"chunks": 10**12}, "--chunks 1000000000000 out of range"),
    ("placement", {"rounds": 10**12}, "--rounds 1000000000000 out of range"),
    ("fec", {"packets": 10**9}, "--packets 1000000000 out of range"),
    ("fec", {"size": 1e12}, "--size 1e+12 B is 690607735 packets of --mss 1448 B; at most 100000"),
])
def test_a_count_or_size_beyond_the_bound_is_refused_before_the_model_runs(model, value, words):
    from analysis.models import get
    with pytest.raises(ValueError) as exc:
        get(model).params(**value)
    assert words in str(exc.value)


def test_every_number_at_its_bound_evaluates_quickly():
    import dataclasses

    from analysis.models import MODELS
    from analysis.models.base import UNIT_HIGH
    for model in MODELS.values():
        for f in dataclasses.fields(model.params):
            unit = f.metadata["unit"]
            if unit in ("choice", "bool") or unit.endswith("list"):
                continue
            high = UNIT_HIGH[unit] if f.metadata["high"] is None else f.metadata["high"]
            start = time.monotonic()
            try:
                model.evaluate(**{f.name: int(high) if unit == "count" else high})
            except ValueError:
                pass                        # refused with a message (e.g. a DIFS of 10^6 s)
            assert time.monotonic() - start < 3, (model.name, f.name)


BDP = '''"""bdp: the bandwidth-delay product of a path (docs/adding.md)."""
from dataclasses import dataclass

from analysis.models.base import Params, Q, param, register


{decorator}
class BdpParams(Params):
    rate: float = param(50e6, "bit/s", "bottleneck rate")
    rtt: float = param(0.02, "s", "round-trip time")


@register("{name}", "", "the bandwidth-delay product", BdpParams)
def bdp(p: BdpParams):
    return {{"bdp": {output}}}
'''


@pytest.mark.parametrize("name,decorator,output,code,out,err", [
    # the guide's model: case "" printed "tbbdp ()"
    ("tbbdp", "@dataclass(frozen=True)", 'Q(p.rate * p.rtt / 8, "B", "bytes in flight that fill the path")',
     0, "tbbdp: the bandwidth-delay product\n", ""),
    # outputs that are not Q: an AttributeError traceback
    ("tbbdpnoq", "@dataclass(frozen=True)", "p.rate * p.rtt / 8", 2, "",
     "testbed: error: model 'tbbdpnoq' ({file}): output 'bdp' is float 250000.0, not a Q; allowed: a dict "
     "{{name: Q(value, unit, help)}}\n"),
    # @dataclass forgotten: no parameters, --rate refused as unrecognized (and a TypeError without it)
    ("tbbdpnodc", "", 'Q(1.0, "B", "x")', 2, "",
     "testbed: error: plugin {file} failed to load: ValueError: model 'tbbdpnodc': params BdpParams has "
     "no @dataclass of its own (its fields would be plain class attributes: no parameters); allowed: "
     "@dataclass(frozen=True) on the line before class BdpParams\n"),
])
def test_a_model_of_ones_own_is_one_line_naming_its_file(tmp_path, name, decorator, output, code, out, err):
    import os
    import subprocess
    import sys

    from conftest import REPO
    plugin = tmp_path / f"{name}.py"
    plugin.write_text(BDP.format(name=name, decorator=decorator, output=output))
    r = subprocess.run([sys.executable, "-m", "testbed", "model", name, "--rate", "20mbit", "--rtt", "100ms"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=60,
                       env={**os.environ, "PYTHONPATH": str(REPO), "TESTBED_PATH": str(tmp_path)})
    assert (r.returncode, r.stderr) == (code, err.format(file=plugin)), r.stderr
    assert r.stdout.startswith(out)
    if code == 0:
        assert "bdp         250,000 B" in r.stdout
        listed = subprocess.run([sys.executable, "-m", "testbed", "model", "--help"], cwd=tmp_path,
                                capture_output=True, text=True, timeout=60,
                                env={**os.environ, "PYTHONPATH": str(REPO), "TESTBED_PATH": str(tmp_path)})
        line = next(ln for ln in listed.stdout.splitlines() if name in ln)
        assert line.split() == [name, "the", "bandwidth-delay", "product"], line     # was ": the ..."
