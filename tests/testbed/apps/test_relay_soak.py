"""Soak (loopback, no root): ``RELAY_SOAK_N`` (default 1,000) short SOCKS5 connections through
the client gateway with ``curl --socks5-hostname``, a random share of them aborted by curl's
``--max-time`` before, during or after the reply of a slow HTTP server.  The gateway must not
exit, must still serve at the end, and must hold no more descriptors than before."""
import os
import random
import shutil
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.fixtures.apps import events
from tests.testbed.apps.test_relay_survives import _fds, _start
from testbed.apps import eventlog as ev

# the apps set TCP_CONGESTION cubic by default, which an unprivileged socket may not
pytestmark = pytest.mark.root

N = int(os.environ.get("RELAY_SOAK_N", "1000"))
BODY = 64 * 1024
MAX_TIMES = (None, None, "0.002", "0.03", "0.08", "0.15")   # None: run to completion


class Slow(BaseHTTPRequestHandler):
    """64 KiB in 8 pieces, 15 ms apart (~0.1 s per reply)."""

    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", str(BODY))
        self.end_headers()
        try:
            for _ in range(8):
                self.wfile.write(b"x" * (BODY // 8))
                self.wfile.flush()
                time.sleep(0.015)
        except OSError:
            pass

    def log_message(self, *args):
        pass


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl not installed (scripts/install.sh)")
def test_curl_soak_with_random_aborts(tmp_path):
    http = ThreadingHTTPServer(("127.0.0.1", 0), Slow)
    http.daemon_threads = True
    threading.Thread(target=http.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{http.server_address[1]}/"
    sgw, tport = _start(["testbed.apps.relay", "server-gw", "--listen", "127.0.0.1:0",
                         "--log", str(tmp_path / "sgw.jsonl")])
    cgw, sport = _start(["testbed.apps.relay", "client-gw", "--socks", "127.0.0.1:0",
                         "--tunnel", f"127.0.0.1:{tport}", "--connect", "optimistic",
                         "--log", str(tmp_path / "cgw.jsonl")])
    rng = random.Random(15)

    def curl(max_time):
        argv = ["curl", "-s", "-o", "/dev/null", "-w", "%{size_download}",
                "--socks5-hostname", f"127.0.0.1:{sport}", url]
        if max_time:
            argv[1:1] = ["--max-time", max_time]
        r = subprocess.run(argv, capture_output=True, text=True, timeout=30)
        return max_time, r.returncode, int(r.stdout or 0)

    try:
        assert curl(None)[2] == BODY
        fds0 = _fds(cgw.pid)
        with ThreadPoolExecutor(8) as pool:
            results = list(pool.map(curl, [rng.choice(MAX_TIMES) for _ in range(N)]))
            assert cgw.poll() is None, "the gateway exited during the soak"
        complete = [r for r in results if r[0] is None]
        aborted = [r for r in results if r[0] is not None and r[1] != 0]
        assert all(r[1] == 0 and r[2] == BODY for r in complete), \
            [r for r in complete if r[1] or r[2] != BODY][:5]
        assert len(aborted) > N // 5                      # aborts did happen
        time.sleep(1.0)
        assert curl(None)[2] == BODY                       # still serving
        time.sleep(0.5)
        fds1 = _fds(cgw.pid)
        print(f"\n{N} connections: {len(complete)} complete, {len(aborted)} aborted by curl, "
              f"{len(events(tmp_path / 'cgw.jsonl', ev.STREAM_RESET))} stream resets; "
              f"gateway fds {fds0} -> {fds1}")
        assert fds1 <= fds0, "the gateway leaked descriptors"
        assert cgw.poll() is None
    finally:
        for p in (cgw, sgw):
            p.terminate()
            p.wait(5)
        http.shutdown()
        http.server_close()
