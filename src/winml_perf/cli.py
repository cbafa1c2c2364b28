"""The `winml` command line: registers commands, nothing else.

Each command lives in its own module under ``winml_perf.commands``. Errors raised as
``WinmlPerfError`` become a one-line message and an exit code in ``main``.
"""

from __future__ import annotations

import os
import sys

import typer

from winml_perf.errors import EXIT_USAGE, WinmlPerfError

app = typer.Typer(
    name="winml",
    help="Benchmark ONNX Runtime GenAI bundles and ONNX models, with EP routing as a measured variable.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
bundle_app = typer.Typer(help="Make, inspect, prepare and clean model bundles.", no_args_is_help=True)
app.add_typer(bundle_app, name="bundle")

# Command modules register themselves on `app` / `bundle_app` when imported.
from winml_perf.commands import bundle as _bundle  # noqa: E402,F401
from winml_perf.commands import devices as _devices  # noqa: E402,F401
from winml_perf.commands import perf as _perf  # noqa: E402,F401
from winml_perf.commands import synth as _synth  # noqa: E402,F401
from winml_perf.commands import results as _results  # noqa: E402,F401
from winml_perf.commands import compare as _compare  # noqa: E402,F401
from winml_perf.commands import dashboard as _dashboard  # noqa: E402,F401


# Typer's parsing errors: recent typer vendors click (typer._click), older typer uses click itself;
# find the classes through typer's own BadParameter rather than importing either.
_CLICK_USAGE_ERROR = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "UsageError")
_CLICK_ERROR = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")


def _verbose(argv: list[str]) -> bool:
    return "--verbose" in argv or "-v" in argv or os.environ.get("WINML_PERF_VERBOSE") == "1"


def main(argv: list[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        app(args=args, standalone_mode=False)
    except WinmlPerfError as exc:
        if _verbose(args):
            import traceback

            traceback.print_exc()
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        sys.exit(130)
    except SystemExit:
        raise
    except typer.Abort:
        sys.exit(1)
    except Exception as exc:  # command-line parsing errors, and anything unexpected
        if isinstance(exc, _CLICK_ERROR):
            exc.show()
            sys.exit(EXIT_USAGE if isinstance(exc, _CLICK_USAGE_ERROR) else 1)
        if _verbose(args):
            raise
        print(f"error: unexpected {type(exc).__name__}: {exc} (rerun with --verbose for the traceback)", file=sys.stderr)
        sys.exit(1)
    sys.exit(0)
