"""Workload parameters: a bad value is one UsageError naming the parameter and what is allowed,
refused when the run is resolved, before anything is brought up (no root).  The library names a
parameter as a RunSpec, a definition file or a sweep writes it (``params.think``); the command
line renders it as its option (``--think``, ``ParamError.render``)."""
import json
from dataclasses import dataclass

import pytest

from testbed import workloads
from testbed.run.plan import resolve
from testbed.spec.errors import UsageError
from testbed.spec.runspec import RunSpec
from testbed.workloads import ParamError, option
from testbed.workloads.base import Workload, param


@pytest.mark.parametrize("workload,params,message", [
    ("reqresp", {"sample": "abc"}, "reqresp: {sample} 'abc': cannot read duration 'abc'"),
    ("reqresp", {"process": "abc"}, "reqresp: {process} 'abc': cannot read duration 'abc'"),
    ("reqresp", {"think": "-1s"}, "reqresp: {think} '-1s': cannot read duration '-1s'"),
    ("reqresp", {"mode": "sometimes"}, "reqresp: {mode} 'sometimes': allowed: new, reuse"),
    ("reqresp", {"requests": "many"}, "reqresp: {requests} 'many': expected an integer"),
    ("reqresp", {"requests": 2.7}, "reqresp: {requests} 2.7: expected an integer"),
    ("reqresp", {"requests": float("inf")}, "reqresp: {requests} inf: expected an integer"),
    ("reqresp", {"requests": "1e400"}, "reqresp: {requests} '1e400': expected an integer"),
    ("reqresp", {"requests": True}, "reqresp: {requests} true: expected an integer"),
    ("reqresp", {"tls_resume": True}, "reqresp: tls_resume (TLS session resumption) needs tls: add {tls}"),
    ("streams", {"chunk_bytes": "big"}, "streams: {chunk_bytes} 'big': cannot read size 'big'"),
    ("audio", {"chunk": "0ms"}, "audio: {chunk} 0ms: give more than 0, e.g. 20ms"),
    ("audio", {"rate": 0}, "audio: {rate} 0: give more than 0, e.g. 24000"),
    ("audio", {"sample_bytes": 0}, "audio: {sample_bytes} 0: give more than 0, e.g. 2"),
    ("audio", {"chunk": "21us"}, "is not a whole positive number of bytes; pick a chunk duration"),
    ("audio", {"duration": "5ms"}, "audio: {duration} 5ms is shorter than one chunk (20ms)"),
    ("bulk", {}, "bulk: needs exactly one of {size} or {duration}"),
])
def test_a_bad_parameter_names_it_as_the_spec_and_the_command_line_write_it(workload, params, message):
    """`--sample abc` and `--process abc` both printed `reqresp: cannot read duration 'abc'`;
    `audio --chunk 0ms` and `--rate 0` failed in the app after the topology was up.  A
    definition file's `params.think = "-1s"` was reported as `--think '-1s'`, an option the
    user never typed: the message names `params.think`, and the command line `--think`."""
    with pytest.raises(UsageError) as err:
        workloads.get(workload).make_params(params)
    names = {n: n for n in ("sample", "process", "think", "mode", "requests", "tls", "chunk_bytes",
                            "chunk", "rate", "sample_bytes", "duration", "size")}
    as_spec = message.format(**{n: f"params.{n}" for n in names})
    assert as_spec in str(err.value)
    assert "--" not in str(err.value)
    if "{" in message:
        assert isinstance(err.value, ParamError)
        assert message.format(**{n: option(n) for n in names}) in err.value.render(option)


def test_a_whole_number_written_as_a_float_is_taken_as_it_is():
    """`requests = 5.0` (a TOML float, a --set) is 5; 2.7 was cut to 2 and 1e400 crashed."""
    assert workloads.get("reqresp").make_params({"requests": 5.0}).requests == 5
    assert workloads.get("reqresp").make_params({"requests": "7"}).requests == 7


def test_a_runspec_from_json_names_the_spec_path():
    spec = RunSpec.from_dict(json.loads('{"topology": "loopback", "workload": "reqresp", '
                                        '"params": {"think": "-1s"}}'))
    with pytest.raises(UsageError, match=r"^reqresp: params\.think '-1s': cannot read duration") as err:
        resolve(spec)
    assert "--think" not in str(err.value)


def test_a_param_error_renders_only_the_names_it_carries():
    err = ParamError("{a} 1 and {b} 2, {c} as written", "a", "b", workload="w")
    assert str(err) == "w: params.a 1 and params.b 2, {c} as written"
    assert err.render(option) == "w: --a 1 and --b 2, {c} as written"
    assert str(ParamError("{a} x", "a").of("reqresp")) == "reqresp: params.a x"


def test_the_shipped_audio_parameters_resolve():
    assert workloads.get("audio").make_params({"rate": 48000, "chunk": "10ms"}).rate == 48000


@pytest.mark.parametrize("workload", ["duplicate", "multipath"])
def test_paths_are_addresses_of_the_client(workload):
    """`--paths 10.9.9.9,...` failed in the app after bring-up: `[Errno 99] Cannot assign
    requested address`, never saying which addresses the client has."""
    with pytest.raises(UsageError, match=rf"^{workload}: params.paths 10.9.9.9,10.0.2.1: 10.9.9.9 not an address "
                                         r"of the client \(host 'client' of topology 'dualpath'\); its "
                                         r"addresses: 10.0.1.1, 10.0.2.1$"):
        resolve(RunSpec(topology="dualpath", workload=workload, params={"paths": "10.9.9.9,10.0.2.1"}))
    resolve(RunSpec(topology="dualpath", workload=workload, params={"paths": "10.0.2.1,10.0.1.1"}))


@dataclass(frozen=True)
class _Refusing:
    """Params that refuse ``when`` (``init`` or ``validate``) with ``how`` (``param`` or ``plain``)."""
    when: str = param("init", "where to refuse", choices=("init", "validate"))
    how: str = param("param", "a ParamError or a plain ValueError", choices=("param", "plain"))

    def __post_init__(self):
        if self.when == "init":
            self._refuse()

    def validate(self) -> None:
        self._refuse()

    def _refuse(self) -> None:
        if self.how == "param":
            raise ParamError(f"{{how}} {self.how} refused at {{when}} {self.when}", "how", "when")
        raise ValueError(f"refused at {self.when}")


@pytest.mark.parametrize("when", ["init", "validate"])
@pytest.mark.parametrize("how, message", [("param", "w: params.how param refused at params.when {when}"),
                                          ("plain", "w: refused at {when}")])
def test_the_params_refusal_is_led_by_the_workload_once_wherever_it_is_raised(when, how, message):
    """A refusal while the params dataclass is built and one of its ``validate`` read alike: the
    workload's name once, a ParamError still naming its parameters (a plain ValueError none)."""
    record = Workload("w", "test workload", "testbed.apps.bulk", _Refusing, 5001)
    with pytest.raises(UsageError) as err:
        record.make_params({"when": when, "how": how})
    assert str(err.value) == message.format(when=when)
    assert isinstance(err.value, ParamError) == (how == "param")
