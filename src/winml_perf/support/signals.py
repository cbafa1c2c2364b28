"""SIGINT and SIGTERM, handled alike from the first line of the command line to its last.

``install_early()`` runs before the CLI imports anything heavy: a signal then exits at once with
128 + its number (nothing has started, so nothing is half-written). ``install()`` runs when the
command starts: a signal then raises ``Interrupted`` (a KeyboardInterrupt), so every ``finally``
cleans up and the CLI keeps what finished. A signal can surface as another exception (numpy turns
an interrupted import into ``ImportError: import numpy failed``): ``received()`` says one came,
and the CLI reports the signal instead of that exception.
"""

from __future__ import annotations

import os
import signal
import sys

from winml_perf.support.errors import Interrupted, signal_name

HANDLED = (signal.SIGINT, signal.SIGTERM)
_received: list[int] = []


def _exit_now(signum: int, _frame: object) -> None:
    _received.append(signum)
    try:
        sys.stderr.write(f"interrupted by {signal_name(signum)}\n")
        sys.stderr.flush()
    finally:
        os._exit(128 + signum)


def _raise_interrupted(signum: int, _frame: object) -> None:
    _received.append(signum)
    raise Interrupted(signum)


def install_early() -> None:
    """Until the command starts: a signal ends the process with 128 + its number."""
    for signum in HANDLED:
        signal.signal(signum, _exit_now)


def install() -> None:
    """While the command runs: a signal raises Interrupted where the program is."""
    for signum in HANDLED:
        signal.signal(signum, _raise_interrupted)


def ignore() -> None:
    """While the closing message is printed: a second signal does not cut it short."""
    for signum in HANDLED:
        signal.signal(signum, signal.SIG_IGN)


def received() -> int | None:
    """The first signal this process received, if any."""
    return _received[0] if _received else None
