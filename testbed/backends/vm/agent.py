#!/usr/bin/python3
"""PID 1 of the testbed's VM (runs *inside* the guest; started by the image's ``/sbin/tb-init``).

The host shares a private control directory over 9p (tag ``tbctl``, mounted at ``/run/tbctl``)
holding this script and ``boot.json``.  The agent:

1. mounts the guest's own tmpfs on /tmp, /var/tmp and /dev/shm, devpts, and each host path of
   ``boot.json``'s ``shares`` over 9p at the same path (parents first);
2. loads ``boot.json``'s kernel modules (sch_netem, sch_htb, …) and brings ``lo`` up;
3. writes ``ready.json`` (kernel release, Python version, CPUs, memory, seconds since boot);
4. every 0.1 s looks for jobs ``jobs/<id>.json`` (argv list, cwd, env — never a shell string),
   runs each in its own session with stdout and stderr into ``jobs/<id>.out`` and ``.err``
   (which the host reads as they grow), and writes ``jobs/<id>.rc.json`` (exit status, seconds)
   when it ends; ``jobs/<id>.cancel`` ends the job's process group (SIGTERM, SIGKILL 5 s later);
5. on ``poweroff`` (a file), ends every job, syncs and powers the guest off.

Only the standard library: the interpreter is the image's /usr/bin/python3.
"""
import ctypes
import json
import os
import platform
import signal
import subprocess
import sys
import time
import traceback

CTL = "/run/tbctl"
JOBS = os.path.join(CTL, "jobs")
RB_POWER_OFF = 0x4321FEDC
MS_RDONLY = 1
KILL_GRACE = 5.0
libc = ctypes.CDLL(None, use_errno=True)


def log(msg):
    print(f"tb-agent: {msg}", flush=True)


def mount(source, target, fstype, options="", flags=0):
    os.makedirs(target, exist_ok=True)
    if libc.mount(source.encode(), target.encode(), fstype.encode(), flags,
                  options.encode() if options else None) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount -t {fstype} {source} {target} ({options}): {os.strerror(err)}")


def write_json(path, obj):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f)
    os.replace(tmp, path)


def setup(boot):
    for d in ("/tmp", "/var/tmp", "/dev/shm"):
        mount("tmpfs", d, "tmpfs", "mode=1777")
    mount("devpts", "/dev/pts", "devpts", "ptmxmode=0666,mode=0620")
    os.makedirs("/run/netns", exist_ok=True)
    for tag, path, writable in boot["shares"]:
        mount(tag, path, "9p", "trans=virtio,version=9p2000.L,msize=524288",
              0 if writable else MS_RDONLY)
    for module in boot["modules"]:
        subprocess.run(["modprobe", module], check=True)
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    if boot.get("hostname"):
        libc.sethostname(boot["hostname"].encode(), len(boot["hostname"]))
    with open("/proc/meminfo") as f:
        mem_kb = int(f.readline().split()[1])
    with open("/proc/uptime") as f:
        uptime = float(f.read().split()[0])
    write_json(os.path.join(CTL, "ready.json"), {
        "kernel": platform.release(), "python": platform.python_version(),
        "cpus": os.cpu_count(), "mem_mb": mem_kb // 1024, "uptime_s": uptime})


class Job:
    def __init__(self, jid, spec):
        self.jid, self.start = jid, time.monotonic()
        self.cancelled_at = None
        base = os.path.join(JOBS, jid)
        with open(base + ".out", "wb") as out, open(base + ".err", "wb") as err:
            try:
                self.proc = subprocess.Popen(spec["argv"], cwd=spec.get("cwd") or "/",
                                             env=spec.get("env"), stdin=subprocess.DEVNULL,
                                             stdout=out, stderr=err, start_new_session=True)
            except OSError as exc:
                err.write(f"tb-agent: cannot run {spec['argv'][0]}: {exc}\n".encode())
                self.proc = None

    def signal(self, sig):
        if self.proc is not None:
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                pass

    def finish(self, returncode):
        write_json(os.path.join(JOBS, self.jid + ".rc.json"),
                   {"returncode": returncode, "seconds": round(time.monotonic() - self.start, 3)})


def serve():
    os.makedirs(JOBS, exist_ok=True)
    running = {}          # pid -> Job
    seen = set()
    while True:
        try:
            names = os.listdir(JOBS)
        except OSError:
            names = []
        if "poweroff" in os.listdir(CTL):
            for job in running.values():
                job.signal(signal.SIGKILL)
            return
        for name in names:
            if not name.endswith(".json") or name.endswith((".rc.json", ".tmp")):
                continue
            jid = name[:-5]
            if jid in seen:
                continue
            seen.add(jid)
            try:
                with open(os.path.join(JOBS, name)) as f:
                    spec = json.load(f)
                job = Job(jid, spec)
            except Exception:
                log(f"job {jid}: {traceback.format_exc().strip().splitlines()[-1]}")
                write_json(os.path.join(JOBS, jid + ".rc.json"), {"returncode": 127, "seconds": 0})
                continue
            if job.proc is None:
                job.finish(127)
            else:
                running[job.proc.pid] = job
        now = time.monotonic()
        for job in running.values():
            if job.cancelled_at is None and os.path.exists(os.path.join(JOBS, job.jid + ".cancel")):
                job.cancelled_at = now
                job.signal(signal.SIGTERM)
            elif job.cancelled_at is not None and now - job.cancelled_at > KILL_GRACE:
                job.signal(signal.SIGKILL)
        while True:     # PID 1 reaps every orphan; a job's own exit status is recorded
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            job = running.pop(pid, None)
            if job is not None:
                job.proc.returncode = os.waitstatus_to_exitcode(status)
                job.signal(signal.SIGKILL)      # what the job left running in its session
                job.finish(job.proc.returncode)
        time.sleep(0.1)


def main():
    try:
        with open(os.path.join(CTL, "boot.json")) as f:
            boot = json.load(f)
        setup(boot)
        serve()
    except BaseException:
        traceback.print_exc()
        sys.stdout.flush()
    finally:
        os.sync()
        libc.reboot(RB_POWER_OFF)


if __name__ == "__main__":
    main()
