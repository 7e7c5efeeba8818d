#!/usr/bin/python3
"""PID 1 of a User-Mode Linux guest started by ``testbed.backends.uml`` (runs *inside* the guest).

The guest's root is the host's filesystem over hostfs, mounted read-only.  This script:
1. reads the job (JSON, written by the host into a private ``tb*`` directory whose path comes in
   the ``tbjob`` kernel parameter, i.e. the environment);
2. mounts the guest's own proc, sys, devtmpfs, devpts, and tmpfs on /tmp, /run, /var/tmp and
   /dev/shm, so nothing the command writes there reaches the host (``ip netns`` uses /run/netns);
3. mounts the host's UML modules on /lib/modules and loads the job's modules with modprobe;
4. mounts the results directory (and any host path hidden under a tmpfs above) read-write or
   read-only over hostfs at the same path;
5. runs the job's argv (a list, never a shell string) with stdout/stderr into files in the
   results directory, then writes ``uml-status.json`` (exit code, guest monotonic times); when the
   host writes a signal number into the job's ``cancel`` file (its caller was interrupted), the
   command gets that signal once, to tear down and write its record as on the host;
6. syncs and powers the guest off.

Only the standard library; the interpreter is the host's /usr/bin/python3.
"""
import ctypes
import json
import os
import subprocess
import sys
import time
import traceback

RB_POWER_OFF = 0x4321FEDC
MS_RDONLY = 1
MODULES_DIR = "/run/tbuml"  # modprobe -d root: the host's UML modules appear in its lib/modules
TMPFS_DIRS = ("/tmp", "/run", "/var/tmp", "/dev/shm")


def mount(source, target, fstype, options="", flags=0):
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.mount(source.encode(), target.encode(), fstype.encode(), flags,
                  options.encode() if options else None) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount -t {fstype} {source} {target} ({options}): {os.strerror(err)}")


def setup(job):
    mount("proc", "/proc", "proc")
    mount("sysfs", "/sys", "sysfs")
    mount("devtmpfs", "/dev", "devtmpfs")
    os.makedirs("/dev/pts", exist_ok=True)
    os.makedirs("/dev/shm", exist_ok=True)
    mount("devpts", "/dev/pts", "devpts", "ptmxmode=0666,mode=0620")
    for d in TMPFS_DIRS:
        if os.path.isdir(d) and not os.path.islink(d):
            mount("tmpfs", d, "tmpfs", "mode=1777")
    os.makedirs("/run/netns", exist_ok=True)
    for path, writable in job["host_paths"]:
        os.makedirs(path, exist_ok=True)  # only creates inside a guest tmpfs
        mount("hostfs", path, "hostfs", path, 0 if writable else MS_RDONLY)
    os.makedirs(MODULES_DIR + "/lib/modules")
    mount("hostfs", MODULES_DIR + "/lib/modules", "hostfs", job["modules_root"], MS_RDONLY)
    for module in job["modules"]:
        subprocess.run(["modprobe", "-d", MODULES_DIR, module], check=True, env=job["env"])


def wait_forwarding(proc, cancel, poll=0.1):
    """Wait for ``proc``; once the file ``cancel`` holds a signal number, send it that signal
    (once).  Returns its exit status."""
    sent = False
    while True:
        try:
            return proc.wait(poll)
        except subprocess.TimeoutExpired:
            pass
        if not sent and os.path.exists(cancel):
            try:
                with open(cancel) as f:
                    signum = int(f.read().strip())
            except (OSError, ValueError):
                continue        # being written: read it at the next poll
            proc.send_signal(signum)
            sent = True


def run(job):
    results = job["results_dir"]
    status = {"returncode": None, "error": None}
    try:
        setup(job)
        status["ready_ns"] = time.monotonic_ns()
        with open(os.path.join(results, "uml-stdout.txt"), "wb") as out, \
                open(os.path.join(results, "uml-stderr.txt"), "wb") as err:
            proc = subprocess.Popen(job["argv"], cwd=job["cwd"], env=job["env"],
                                    stdin=subprocess.DEVNULL, stdout=out, stderr=err)
            status["returncode"] = wait_forwarding(proc, job["cancel"])
        status["done_ns"] = time.monotonic_ns()
    except BaseException as exc:  # report anything, then still power off
        status["error"] = "".join(traceback.format_exception(exc))
    try:
        with open(os.path.join(results, "uml-status.json"), "w") as f:
            json.dump(status, f)
    except OSError:
        print(json.dumps(status), flush=True)  # the host still sees it on the console
    if status["error"]:
        print(status["error"], file=sys.stderr, flush=True)


def main():
    try:
        with open(os.environ["tbjob"]) as f:
            job = json.load(f)
        run(job)
    except BaseException:
        traceback.print_exc()
    finally:
        os.sync()
        ctypes.CDLL(None).reboot(RB_POWER_OFF)


if __name__ == "__main__":
    main()
