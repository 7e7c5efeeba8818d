"""The checkout's git revision, read where git is (the host) and handed to a command in the VM,
whose image has no git: ``HOST_GIT_ENV`` in the command's environment holds the host's
``local_git`` as JSON; ``testbed.run.provenance.git_revision`` records it, marked ``FROM_HOST``.

Division of labour: reads git, knows nothing of runs or guests; imported by the VM backend
(which hands the revision in) and by ``testbed.run.provenance`` (which records it).
"""
from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

HOST_GIT_ENV = "TESTBED_HOST_GIT"
FROM_HOST = "the host's checkout, shared into the guest (no git in the guest)"


def _git(repo: Path, *args: str) -> str | None:
    """git's stdout, stripped; None when git is missing, fails or hangs."""
    try:
        out = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                             timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def local_git(repo: Path) -> dict[str, Any]:
    """``{"revision", "dirty"}`` of the checkout at ``repo`` by this machine's git: HEAD and
    whether tracked files differ from it; both None without git."""
    rev = _git(repo, "rev-parse", "HEAD")
    if rev is None or not re.fullmatch(r"[0-9a-f]{40,64}", rev):
        return {"revision": None, "dirty": None}
    status = _git(repo, "status", "--porcelain", "--untracked-files=no")
    return {"revision": rev, "dirty": None if status is None else status != ""}


def host_git_env(repo: Path) -> dict[str, str]:
    """The environment that hands the host's revision of ``repo`` to a command in the guest."""
    return {HOST_GIT_ENV: json.dumps(local_git(repo))}
