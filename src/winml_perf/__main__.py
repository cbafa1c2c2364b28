"""`winml` and `python -m winml_perf`: signals are handled before anything else is imported."""

from winml_perf.support import signals

signals.install_early()  # a SIGTERM during the imports below exits 143, not "unexpected ImportError"


def main() -> None:
    from winml_perf.cli import main as cli_main

    cli_main()


if __name__ == "__main__":
    main()
