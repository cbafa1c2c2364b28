"""The `winml` command line: mounts the commands' own apps, nothing else.

Each command lives in its own module under ``winml_perf.commands`` and imports nothing from here.
Errors raised as ``WinmlPerfError`` become a one-line message and an exit code in ``main``.
"""

from __future__ import annotations

import atexit
import functools
import gc
import os
import signal
import sys
from typing import Any, NoReturn

import typer

from winml_perf.commands import bundle, compare, dashboard, devices, perf, results, serve, tune
from winml_perf.commands.help_style import PlainHelpCommand, PlainTyper
from winml_perf.support import signals
from winml_perf.support.errors import EXIT_USAGE, RunInterrupted, WinmlPerfError, environment_error

# At exit the interpreter's last collections walk every live object (~0.2 s with numpy, scipy and
# onnxruntime loaded, after the results are out); frozen objects are skipped. Memory goes back to
# the system with the process; objects freed by reference count are still freed.
atexit.register(gc.freeze)

app = PlainTyper(
    name="winml",
    help="Benchmark ONNX Runtime GenAI bundles and ONNX models, with EP routing as a measured variable.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


def _print_version(value: bool) -> None:
    if value:
        from winml_perf import __version__

        print(f"winml-perf {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", metavar="", is_eager=True, callback=_print_version, help="Print the version and exit."
    ),
) -> None:
    """Benchmark ONNX Runtime GenAI bundles and ONNX models, with EP routing as a measured variable."""


app.command("perf", cls=PlainHelpCommand, epilog=perf.EPILOG)(perf.perf)
app.command("devices")(devices.devices_command)
app.add_typer(bundle.app, name="bundle")
app.add_typer(results.app, name="results")
app.add_typer(compare.app, name="compare")
app.command("dashboard")(dashboard.dashboard_command)
app.command("tune", cls=PlainHelpCommand, epilog=tune.EPILOG)(tune.tune_command)
app.command("serve", cls=PlainHelpCommand, epilog=serve.EPILOG)(serve.serve_command)


# Typer's parsing errors: recent typer vendors click (typer._click), older typer uses click itself;
# find the classes through typer's own BadParameter rather than importing either.
_CLICK_USAGE_ERROR = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "UsageError")
_CLICK_ERROR = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")


def _verbose(argv: list[str]) -> bool:
    return "--verbose" in argv or "-v" in argv or os.environ.get("WINML_PERF_VERBOSE") == "1"


def _exit_code(result: object) -> int:
    """What typer's app(standalone_mode=False) handed back: None for success, else an exit code
    (typer returns a command's Exit, and 130 for a KeyboardInterrupt, instead of raising them)."""
    if result is None:
        return 0
    return result if isinstance(result, int) else 1


def _interrupted(signum: int) -> None:
    from winml_perf.support.errors import signal_name

    signals.ignore()  # a second Ctrl-C does not cut the message short
    print(f"interrupted by {signal_name(signum)}", file=sys.stderr)
    sys.exit(128 + signum)


def _say(message: str) -> None:
    """Every closing message goes out through the one mask: no password of a store URL in a log."""
    from winml_perf.support.secrets import mask
    from winml_perf.support.text_table import fill

    print(fill(mask(message)), file=sys.stderr)  # within the terminal, as every table and note


def _drop_stdout() -> None:
    """Point stdout at the null device, so that flushing what is left at exit raises nothing."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass
    finally:
        os.close(devnull)


def _reader_left(exc: SystemExit) -> bool:
    """Whether this exit 1 is how rich (Console.on_broken_pipe) or click (EPIPE: stdout wrapped in
    PacifyFlushWrapper) stop when stdout's reader has left: no failure of ours."""
    if type(sys.stdout).__name__ == "PacifyFlushWrapper":
        return True
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return tb is not None and tb.tb_frame.f_code.co_name == "on_broken_pipe"


@functools.cache
def _command() -> Any:
    """The click command tree typer builds from every command's signature (~0.2 CPU s, most of a
    short command's own time): built once per process, not on every call of ``main``."""
    return typer.main.get_command(app)


def _remember_store_secrets(args: list[str]) -> None:
    """The credentials of every store location this run was handed (--store, $WINML_PERF_STORE)
    are hidden from all it prints, before anything (a parsing error included) can print them."""
    from winml_perf.support import secrets

    secrets.remember(os.environ.get("WINML_PERF_STORE"))
    for i, arg in enumerate(args):
        if arg.startswith("--") and "=" in arg:
            secrets.remember(arg.partition("=")[2])
        elif arg.startswith("-") and i + 1 < len(args):
            secrets.remember(args[i + 1])
        if "://" in arg:
            secrets.remember(arg)


def _traceback() -> None:
    """The traceback of the exception being handled, on stderr (through the guard: masked, cleaned)."""
    import traceback

    traceback.print_exc(file=sys.stderr)


def main(argv: list[str] | None = None) -> None:
    from winml_perf.support.stdio import guarded_streams, own_stdout

    _remember_store_secrets(list(sys.argv[1:] if argv is None else argv))
    # native EP libraries print on fd 1; our output keeps the real stdout. Every write then passes
    # the one redaction and the one terminal sanitiser (support/stdio.py GuardedText).
    with own_stdout(), guarded_streams():
        _main(argv)


def _main(argv: list[str] | None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    signals.install()
    try:
        code = _exit_code(_command()(args=args, standalone_mode=False))
    except WinmlPerfError as exc:
        if _verbose(args):
            _traceback()
        _say(str(exc) if isinstance(exc, RunInterrupted) else f"error: {exc}")
        sys.exit(exc.exit_code)
    except KeyboardInterrupt as exc:  # raised outside typer's own handling
        _interrupted(getattr(exc, "signum", signal.SIGINT))
    except SystemExit as exc:
        if exc.code == 1 and _reader_left(exc):  # `winml --help | head -1`: the reader had what it wanted
            _drop_stdout()
            sys.exit(0)
        raise
    except typer.Abort:
        sys.exit(1)
    except BrokenPipeError:  # stdout's reader left (`winml ... | head -1`): it had what it wanted; stop quietly
        _drop_stdout()
        sys.exit(0)
    except OSError as exc:  # a full disk or a read-only folder is the machine's state, not a bug: exit 2
        _exit_os_error(exc, args)
    except ModuleNotFoundError as exc:  # an optional feature's module: exit 2 naming the pip command
        _exit_missing_module(exc, args)
    except Exception as exc:  # command-line parsing errors, and anything unexpected
        _exit_unexpected(exc, args)
    if signals.received() is not None and code == 130:
        _interrupted(signals.received() or signal.SIGINT)
    sys.exit(code)


def _exit_os_error(exc: OSError, args: list[str]) -> NoReturn:
    if signals.received() is not None:
        _interrupted(signals.received() or signal.SIGTERM)
    usage = environment_error(exc)
    if usage is None or _verbose(args):
        if _verbose(args):
            _traceback()
        _say(f"error: unexpected {type(exc).__name__}: {exc} (rerun with --verbose for the traceback)")
        sys.exit(1)
    _say(f"error: {usage}")
    sys.exit(usage.exit_code)


def _exit_missing_module(exc: ModuleNotFoundError, args: list[str]) -> NoReturn:
    from winml_perf.support.optional import missing_module_error

    if signals.received() is not None:
        _interrupted(signals.received() or signal.SIGTERM)
    usage_error = missing_module_error(exc)
    if _verbose(args):
        import traceback

        traceback.print_exc()
    if usage_error is None:
        _say(f"error: unexpected {type(exc).__name__}: {exc} (rerun with --verbose for the traceback)")
        sys.exit(1)
    _say(f"error: {usage_error}")
    sys.exit(usage_error.exit_code)


def _exit_unexpected(exc: Exception, args: list[str]) -> NoReturn:
    if signals.received() is not None:  # what a signal caused (an interrupted import) is the signal's
        _interrupted(signals.received() or signal.SIGTERM)
    if isinstance(exc, _CLICK_ERROR):
        exc.show()  # type: ignore[attr-defined]  # _CLICK_ERROR is click's ClickException, found at run time
        sys.exit(EXIT_USAGE if isinstance(exc, _CLICK_USAGE_ERROR) else 1)
    if _verbose(args):
        _traceback()
    _say(f"error: unexpected {type(exc).__name__}: {exc} (rerun with --verbose for the traceback)")
    sys.exit(1)
