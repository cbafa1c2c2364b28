"""One exception root; subclasses carry a remedy and the exit code the CLI maps them to.

Exit codes: 0 success, 1 a benchmark or regression failure, 2 bad input or usage.
"""

from __future__ import annotations

import errno

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2


class WinmlPerfError(Exception):
    """Root of every error this tool reports to a user.

    ``message`` says what is wrong (naming the file, key or flag); ``remedy`` says what to do.
    """

    exit_code = EXIT_USAGE

    def __init__(self, message: str, remedy: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.remedy = remedy

    def __str__(self) -> str:
        if self.remedy:
            return f"{self.message}; {self.remedy}"
        return self.message


class UsageError(WinmlPerfError):
    """A flag, or a combination of flags, that cannot work."""


class BundleError(WinmlPerfError):
    """A bundle folder, genai_config.json or model file that is missing or malformed."""


class EPUnavailableError(WinmlPerfError):
    """An execution provider or device that was asked for is not available on this machine."""


class PluginError(WinmlPerfError):
    """A plugin EP library that could not be found or registered."""


class StoreError(WinmlPerfError):
    """A results store that cannot be opened, read or written."""


class Interrupted(KeyboardInterrupt):
    """The run was stopped by a signal (SIGINT, SIGTERM); exit code 128 + the signal's number.

    A KeyboardInterrupt, so every ``finally`` and ``except KeyboardInterrupt`` sees it as Ctrl-C."""

    def __init__(self, signum: int, message: str = "") -> None:
        super().__init__(message)
        self.signum = signum
        self.message = message

    @property
    def exit_code(self) -> int:
        return 128 + self.signum

    def __str__(self) -> str:
        return f"interrupted by {signal_name(self.signum)}" + (f": {self.message}" if self.message else "")


def signal_name(signum: int) -> str:
    import signal

    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


class RunInterrupted(WinmlPerfError):
    """What a command reports once it has kept what an interrupted run finished (exit 128 + signal)."""

    def __init__(self, signum: int, message: str) -> None:
        super().__init__(f"interrupted by {signal_name(signum)}: {message}")
        self.signum = signum

    @property
    def exit_code(self) -> int:  # type: ignore[override]
        return 128 + self.signum


class BenchmarkFailure(WinmlPerfError):
    """The benchmark ran but failed: a crashed cell, a regression beyond the gate, a strict check."""

    exit_code = EXIT_FAILURE


#: errnos of a place the machine will not let us write: the disk, a quota, a read-only or forbidden folder
_ENVIRONMENT_ERRNOS = {
    errno.ENOSPC: "no space left on the device",
    errno.EDQUOT: "the disk quota is used up",
    errno.EROFS: "the file system is read-only",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
}


def environment_error(exc: OSError) -> UsageError | None:
    """The usage error an OSError of the machine's own making is (a full disk, a read-only folder),
    naming the path; None for any other OSError."""
    what = _ENVIRONMENT_ERRNOS.get(exc.errno or -1)
    if what is None:
        return None
    where = exc.filename or "a file winml-perf was writing"
    return UsageError(
        f"{where}: {what} (errno {exc.errno})",
        "free space or fix the folder's permissions, or point --store / -o elsewhere; "
        "records stored before this error are kept (each cell is stored in its own transaction)",
    )
