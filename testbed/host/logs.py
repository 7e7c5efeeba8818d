"""Log lines on stderr as the CLI prints them (``testbed: warning: …``), in the command's
process and in each campaign worker's (``experiments.cluster``: a spawned process, where the
command's set-up never ran)."""
from __future__ import annotations

import logging
import sys

#: libraries whose info and debug lines -v and -vv leave out (their warnings still show)
QUIET_LIBRARIES = ("pyroute2", "asyncio", "fontTools", "matplotlib", "PIL")


def log_to_stderr(level: int) -> None:
    """One handler on the root logger, at ``level``: ``testbed: LEVEL: message``, lower-case
    level names; at info and debug (-v, -vv) the testbed's lines, not every netlink message
    (pyroute2 resets its own level) nor what matplotlib's font subsetting says of each figure
    (:data:`QUIET_LIBRARIES`).  Dask's lines, which no handler of Dask's takes in a worker, errors
    only above info (a worker stopped with its coordinator logs each cancelled task)."""
    _undo_mininet_loggers()
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("testbed: %(levelname)s: %(message)s"))
    handler.addFilter(lambda r: r.levelno >= logging.WARNING or not r.name.startswith(QUIET_LIBRARIES))
    handler.testbed = True          # set up already (:func:`logging_set_up`)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for lv in (logging.WARNING, logging.INFO, logging.ERROR, logging.DEBUG):
        logging.addLevelName(lv, logging.getLevelName(lv).lower())
    dask = logging.getLogger("distributed")
    if not dask.handlers and level > logging.INFO:
        dask.setLevel(logging.ERROR)


def logging_set_up() -> bool:
    """Whether :func:`log_to_stderr` ran in this process (a ``testbed`` command's: its -v, -q)."""
    return any(getattr(h, "testbed", False) for h in logging.getLogger().handlers)


def _undo_mininet_loggers() -> None:
    """Importing ``mininet.log`` makes every logger created afterwards a MininetLogger with its
    own newline-less stderr handler at Mininet's level (each warning printed twice, run
    together; info lines lost at -v): plain loggers from now on, and those made so far without
    that handler and level."""
    try:
        import mininet.log as mininet_log
    except ImportError:
        return
    logging.setLoggerClass(logging.Logger)
    for name, logger in list(logging.root.manager.loggerDict.items()):
        if isinstance(logger, mininet_log.MininetLogger) and name != "mininet":
            logger.handlers[:] = []
            if logger.level == mininet_log.LOGLEVELDEFAULT:     # Mininet's, set on every one
                logger.setLevel(logging.NOTSET)
