"""Workload parameters: a bad value is one UsageError naming its option and what is allowed,
refused when the run is resolved, before anything is brought up (no root)."""
import pytest

from testbed import workloads
from testbed.run.plan import resolve
from testbed.spec.errors import UsageError
from testbed.spec.runspec import RunSpec


@pytest.mark.parametrize("workload,params,message", [
    ("reqresp", {"sample": "abc"}, "reqresp: --sample 'abc': cannot read duration 'abc'"),
    ("reqresp", {"process": "abc"}, "reqresp: --process 'abc': cannot read duration 'abc'"),
    ("reqresp", {"mode": "sometimes"}, "reqresp: --mode 'sometimes': allowed: new, reuse"),
    ("reqresp", {"requests": "many"}, "reqresp: --requests 'many': expected an integer"),
    ("streams", {"chunk_bytes": "big"}, "streams: --chunk-bytes 'big': cannot read size 'big'"),
    ("audio", {"chunk": "0ms"}, "audio: --chunk 0ms: give more than 0, e.g. 20ms"),
    ("audio", {"rate": 0}, "audio: --rate 0: give more than 0, e.g. 24000"),
    ("audio", {"sample_bytes": 0}, "audio: --sample-bytes 0: give more than 0, e.g. 2"),
    ("audio", {"chunk": "21us"}, "is not a whole positive number of bytes; pick a chunk duration"),
    ("audio", {"duration": "5ms"}, "audio: --duration 5ms is shorter than one chunk (20ms)"),
])
def test_a_bad_parameter_names_its_option(workload, params, message):
    """`--sample abc` and `--process abc` both printed `reqresp: cannot read duration 'abc'`;
    `audio --chunk 0ms` and `--rate 0` failed in the app after the topology was up."""
    with pytest.raises(UsageError) as err:
        workloads.get(workload).make_params(params)
    assert message in str(err.value)


def test_the_shipped_audio_parameters_resolve():
    assert workloads.get("audio").make_params({"rate": 48000, "chunk": "10ms"}).rate == 48000


@pytest.mark.parametrize("workload", ["duplicate", "multipath"])
def test_paths_are_addresses_of_the_client(workload):
    """`--paths 10.9.9.9,...` failed in the app after bring-up: `[Errno 99] Cannot assign
    requested address`, never saying which addresses the client has."""
    with pytest.raises(UsageError, match=rf"^{workload} --paths 10.9.9.9,10.0.2.1: 10.9.9.9 not an address "
                                         r"of the client \(host 'client' of topology 'dualpath'\); its "
                                         r"addresses: 10.0.1.1, 10.0.2.1$"):
        resolve(RunSpec(topology="dualpath", workload=workload, params={"paths": "10.9.9.9,10.0.2.1"}))
    resolve(RunSpec(topology="dualpath", workload=workload, params={"paths": "10.0.2.1,10.0.1.1"}))
