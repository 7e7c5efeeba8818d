"""Screenshot agent loop (CHAPTER12.md C13): N rounds of upload S bytes → remote model thinks
T → small action back → terminal work W on the device → next round.

The server is the request/response server (``python -m testbed.apps.reqresp server``): a
round is one request with body S (the fixed generated payload), processing T, reply A.
``--reuse`` keeps one connection for all rounds (opened, not warmed, before round 0);
otherwise every round opens a new connection (and TLS session with ``--tls``).

A round k is: encoding E (``--encode``, a timed step on the device), the request (upload S,
the model's T on the server, action A back), terminal work W; ``--prep`` P is one timed step
before the first round (e.g. loading a model at a place).  Timed steps stand for computation:
they sleep exactly their configured time and are logged as ``step`` events (name, round, start,
ms), so the timelines show them.

Events: ``round_start``/``round_end`` (round k; ``round_end.round_ms`` covers the request
from issuing it to the last action byte, excluding encoding and terminal work), ``step``, plus
every request/response event of ``reqresp`` with ``req`` = round.  ``summary``: ``total_s`` =
the whole run, from before the preparation to the end of the last terminal work (a reused
connection's opening included); ``setup_s`` = preparation and opening before the first round;
``round_s`` = per round (first attempts), round_start to the end of its terminal work;
``redo_s`` = the same for rounds done again after a disconnect; ``disconnect_s`` = the drop, the
reconnect step and a kept connection's reopening; ``round_ms`` the requests.

Disconnect (``--disconnect K:keep|K:lose``): after round K the device drops its connection (RST)
and the network is back after ``--reconnect`` (a timed step); every round's request carries an
operation id (session << 32 | round) and the server executes an id once (the idempotence rule,
``reqresp.Operations``).  ``keep``: the commit log kept rounds 1..K−1 (round K's commit rides on
round K+1's request, which never went), so round K is sent again with the same id — the server
answers without running the model twice; ``lose``: nothing kept, rounds 1..K again in a new
session (new ids, executed again).
"""
from __future__ import annotations

import argparse
import sys

from testbed.apps import eventlog as ev
from testbed.apps import payload, tcpopts
from testbed.apps.appmain import guarded, parse_hostport
from testbed.apps.reqresp import Client, add_common, timed_step
from testbed.spec.units import parse_size, parse_time
from testbed.workloads import AgentParams, add_params
from testbed.workloads.agent import parse_disconnect


def run_client(args) -> int:
    log = ev.EventLog(args.log)

    def run() -> int:
        log.emit(ev.START, role="agent", argv=sys.argv[1:])
        if args.rounds < 1:
            raise ValueError(f"--rounds {args.rounds} must be >= 1")
        body = payload.body(parse_size(args.screenshot))
        log.emit(ev.REQUEST_BODY, bytes=len(body), sha256=payload.digest(body))
        client = Client(log, parse_hostport(args.server, "127.0.0.1"), tcpopts.socket_factors(args),
                        body, parse_size(args.action), int(round(parse_time(args.model) * 1e6)),
                        parse_time(args.sample), args.tls, timeout=parse_time(args.timeout))
        mode = "reuse" if args.reuse else "new"
        terminal, encode = parse_time(args.terminal), parse_time(args.encode)
        after, commit = parse_disconnect(args.disconnect)
        t_start = ev.now()
        timed_step(log, "prep", parse_time(args.prep), round=None)
        if args.reuse:
            client.open("setup")
        setup = (ev.now() - t_start) / 1e9
        rounds, whole, redo = [], [], []
        k = req = redo_until = 0
        session, lost = 1, 0.0
        try:
            while k < args.rounds:
                retry = k < redo_until
                t_round = log.emit(ev.ROUND_START, round=k, req=req, retry=retry)["t"]
                timed_step(log, "encode", encode, round=k)
                rounds.append(client.request(req, mode, op=(session << 32) | k, round=k) / 1e6)
                log.emit(ev.ROUND_END, round=k, req=req, round_ms=rounds[-1])
                timed_step(log, "terminal", terminal, round=k)
                (redo if retry else whole).append((ev.now() - t_round) / 1e9)
                k, req = k + 1, req + 1
                if k == after and not redo_until:
                    t_cut = ev.now()
                    redo_until = k
                    k, session = disconnect(log, client, k, commit, session,
                                            parse_time(args.reconnect), args.reuse)
                    lost = (ev.now() - t_cut) / 1e9
        finally:
            client.close()
        total = (ev.now() - t_start) / 1e9
        log.emit(ev.SUMMARY, rounds=len(whole), mode=mode, total_s=total, setup_s=setup,
                 round_s=whole, redo_s=redo, disconnect_s=lost, round_ms=rounds)
        print(f"{len(whole)} rounds ({mode}): {total:.3f} s total", flush=True)
        return 0
    return guarded(run, log)


def disconnect(log: ev.EventLog, client: Client, done: int, commit: str, session: int,
               reconnect: float, reuse: bool) -> tuple[int, int]:
    """The device loses its connection after ``done`` rounds: the connection is dropped (RST),
    the network is back after ``reconnect`` (a timed step), a kept connection is opened again.
    Returns (the round to go on from, the session of the operation ids): ``keep`` — the commit
    log kept the rounds whose commit was confirmed, all but the last (its commit rides on the
    next round's request), and the same session's ids, so the server does not execute the
    retried round twice; ``lose`` — nothing kept, a new session from round 0."""
    client.abort()
    resume = done - 1 if commit == "keep" else 0
    log.emit(ev.DISCONNECT, round=done - 1, commit=commit, kept=resume, redo=done - resume)
    timed_step(log, "reconnect", reconnect, round=done - 1)
    if reuse:
        client.open("reconnect")
    return resume, session if commit == "keep" else session + 1


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m testbed.apps.agent", description=__doc__.split("\n\n")[0])
    p.add_argument("--server", required=True, help="HOST:PORT of a reqresp server")
    p.add_argument("--timeout", default="10s", help="connect timeout (default: 10s)")
    add_params(p, AgentParams, ("client", "both"))   # one default each: testbed.workloads
    add_common(p)
    args = p.parse_args(argv)
    return run_client(args)


if __name__ == "__main__":
    raise SystemExit(main())
