"""The Testbed's hosts: every host names every other (``testbed.host.namespace.host_names``)."""
import subprocess
import sys

import pytest

from testbed.host.namespace import hosts_file_text


def test_hosts_file_puts_the_topologys_names_first_and_keeps_the_machines_others():
    system = "127.0.0.1 localhost\n127.0.1.1 server myhost  # the machine\n::1 localhost ip6-localhost\n"
    text = hosts_file_text({"client": "10.0.0.1", "server": "10.0.0.2"}, system)
    lines = [line for line in text.splitlines() if not line.startswith("#")]
    assert lines[:2] == ["10.0.0.1\tclient", "10.0.0.2\tserver"]
    assert "127.0.0.1 localhost" in lines and "::1 localhost ip6-localhost" in lines
    assert not any("myhost" in line for line in lines)    # its line named `server`: dropped
    assert "localhost" in hosts_file_text({"a": "10.0.0.1"}, "")     # no system file: localhost


@pytest.mark.root
def test_every_host_resolves_every_other_by_name_and_nothing_is_left(tmp_path):
    from testbed.run.network import Testbed
    before = open("/etc/hosts").read()
    with Testbed("relay", backend="userspace", overrides={"loss_down": "0%", "delay": "1ms"},
                 results_root=tmp_path) as tb:
        resolve = ("import socket, sys; print(' '.join(socket.gethostbyname(n) for n in "
                   "sys.argv[1:]))")
        for host in tb.hosts:
            out = tb.run(host, [sys.executable, "-c", resolve, *sorted(tb.hosts)], check=True)
            assert out.stdout.split() == [tb.names[host][n] for n in sorted(tb.hosts)]
            for name in tb.names[host]:     # reachable at the address it resolves to
                assert tb.run(host, ["ping", "-c", "1", "-W", "2", name]).returncode == 0, (host, name)
        assert tb.run("client", ["getent", "hosts", "server"]).stdout.split() == ["10.0.3.2", "server"]
        assert tb.names["client"]["sgw"] == "10.0.2.2" and tb.names["server"]["cgw"] == "10.0.2.1"
        assert tb.metadata["hosts"]["client"]["names"] == tb.names["client"]
        mounts = subprocess.run(["findmnt", "-n", "/etc/hosts"], capture_output=True, text=True)
        assert mounts.stdout == ""                         # the mounts are the hosts' own
    assert open("/etc/hosts").read() == before


@pytest.mark.root
def test_socks5_with_a_remote_name_resolves_at_the_far_gateway(tmp_path):
    """curl --socks5-hostname cgw:1080 http://server:8000/ from the client through the relay
    gateways: the client resolves cgw, the server gateway resolves server."""
    from testbed.host.ready import wait_ready
    from testbed.run.network import Testbed
    py = [sys.executable, "-m"]
    (tmp_path / "www").mkdir()
    (tmp_path / "www" / "index.html").write_text("hello from server\n")
    with Testbed("relay", backend="userspace", overrides={"loss_down": "0%", "delay": "1ms"},
                 results_root=tmp_path) as tb:
        web = tb.popen("server", [*py, "http.server", "8000", "-d", str(tmp_path / "www")])
        sgw = tb.popen("sgw", [*py, "testbed.apps.relay", "server-gw", "--listen", "0.0.0.0:7000",
                               "--log", str(tmp_path / "sgw.jsonl")])
        wait_ready(sgw, "server gateway")
        cgw = tb.popen("cgw", [*py, "testbed.apps.relay", "client-gw", "--socks", "0.0.0.0:1080",
                               "--tunnel", "sgw:7000", "--log", str(tmp_path / "cgw.jsonl")])
        wait_ready(cgw, "client gateway")
        out = tb.run("client", ["curl", "-sS", "--retry", "5", "--retry-connrefused",
                                "--socks5-hostname", "cgw:1080", "http://server:8000/"], timeout=60)
        assert out.returncode == 0 and out.stdout == "hello from server\n", out.stderr
        for proc in (cgw, sgw, web):
            proc.kill()
            proc.communicate()
